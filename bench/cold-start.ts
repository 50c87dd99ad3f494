/**
 * Cold start: how long a `tetraloop` process takes from spawn to useful — `tetraloop --help` to its
 * exit, `tetraloop api` to a 200 on /readyz, `tetraloop worker --pool tool --metrics-port P` to a
 * 200 on its /readyz — run from the built bundle (what the bin runs), from the built per-module
 * JavaScript (what it runs with OpenTelemetry tracing on) and from the TypeScript sources (tsx, its
 * transform cache warm, as in development). The built JavaScript is staged afresh outside the
 * checkout's packages (`scripts/build.mjs --no-types --out-dir`), so edits in progress change
 * nothing. Each figure is the median of RUNS processes, started one at a time, targets in turns.
 */
import { spawn, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { startRedisServer } from '@tetraloop/core/runtime';
import { median } from './support/stack.js';

const RUNS = 5;
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const STAGE = fileURLToPath(new URL('../node_modules/.cache/tetraloop-cold-start/', import.meta.url));
/** How often a probe asks /readyz: a figure is late by up to this much. */
const POLL_MS = 10;

/** Runs the staged per-module build's main, as the bin does when tracing is on (without tracing). */
const MODULES_ENTRY = `${STAGE}modules-entry.mjs`;

const FROM = {
  built: [`${STAGE}apps/cli/bin/tetraloop.mjs`],
  'built, per module': [MODULES_ENTRY],
  // The condition makes the bin run the sources even where a current build exists.
  sources: ['--conditions=tetraloop-source', `${ROOT}apps/cli/bin/tetraloop.mjs`],
} as const;
type From = keyof typeof FROM;
const TARGETS = ['help', 'api', 'worker'] as const;
type Target = (typeof TARGETS)[number];

export interface ColdStartRow {
  target: Target;
  from: From;
  medianMs: number;
  minMs: number;
  maxMs: number;
}

export interface ColdStartResult {
  buildMs: number;
  loadAverage: number[];
  rows: ColdStartRow[];
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves once `url` answers 200 (or rejects when the process ends first). */
async function until200(url: string, exited: Promise<unknown>): Promise<void> {
  let done = false;
  void exited.then(() => (done = true));
  for (;;) {
    if (done) throw new Error(`the process ended before ${url} answered`);
    const ok = await fetch(url).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** One process of `target` from `from`: ms from spawn to exit (help) or to its ready probe. */
async function once(target: Target, from: From, redisUrl: string): Promise<number> {
  const port = await freePort();
  const args = {
    help: ['--help'],
    api: ['api'],
    worker: ['worker', '--pool', 'tool', '--metrics-port', `${port}`],
  }[target];
  const env = {
    PATH: process.env.PATH ?? '',
    REDIS_URL: redisUrl,
    TETRALOOP_PREFIX: `cold-${randomUUID().slice(0, 8)}`,
    TETRALOOP_AUTH: 'off',
    HOST: '127.0.0.1',
    PORT: `${port}`,
    LOG_LEVEL: 'silent',
  };
  const started = performance.now();
  const child = spawn(process.execPath, [...FROM[from], ...args], { env, stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    if (target === 'help') await exited;
    else await until200(`http://127.0.0.1:${port}/readyz`, exited);
    return performance.now() - started;
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

export async function runColdStart(): Promise<ColdStartResult> {
  const buildStarted = performance.now();
  execFileSync(process.execPath, ['scripts/build.mjs', '--no-types', '--out-dir', STAGE], {
    cwd: ROOT,
    stdio: 'ignore',
  });
  const buildMs = performance.now() - buildStarted;
  writeFileSync(
    MODULES_ENTRY,
    "const { main } = await import('./apps/cli/dist/main.js');\nawait main(process.argv.slice(2));\n",
  );
  const redis = await startRedisServer();
  const loadAverage = loadavg().map((l) => Math.round(l * 100) / 100);
  const samples = new Map<string, number[]>();
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const target of TARGETS) {
        for (const from of Object.keys(FROM) as From[]) {
          const key = `${target}:${from}`;
          samples.set(key, [...(samples.get(key) ?? []), await once(target, from, redis.url)]);
        }
      }
    }
  } finally {
    await redis.stop();
  }
  const rows = [...samples].map(([key, ms]) => {
    const [target, from] = key.split(':') as [Target, From];
    return {
      target,
      from,
      medianMs: Math.round(median(ms)),
      minMs: Math.round(Math.min(...ms)),
      maxMs: Math.round(Math.max(...ms)),
    };
  });
  return { buildMs: Math.round(buildMs), loadAverage, rows };
}

const WHAT: Record<Target, string> = {
  help: '`tetraloop --help`, to exit',
  api: '`tetraloop api`, to /readyz 200',
  worker: '`tetraloop worker --pool tool`, to /readyz 200',
};

export function coldStartTable(result: ColdStartResult): string {
  const lines = [
    `Built JavaScript staged in ${result.buildMs} ms (\`scripts/build.mjs --no-types\`); load average at start ${result.loadAverage.join(', ')}; ${RUNS} processes each.`,
    '',
    '| process | from | median ms | min ms | max ms |',
    '| --- | --- | ---: | ---: | ---: |',
  ];
  for (const row of result.rows) {
    lines.push(`| ${WHAT[row.target]} | ${row.from} | ${row.medianMs} | ${row.minMs} | ${row.maxMs} |`);
  }
  return lines.join('\n');
}
