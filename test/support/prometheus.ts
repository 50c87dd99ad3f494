/**
 * A real `prometheus` binary for tests: its own config, rules and data in a temp directory, on a
 * free loopback port, read through its HTTP API. Nothing here fakes Prometheus' evaluation.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort } from '@tetraloop/core/runtime';

/** Whether a `prometheus` binary is on PATH. */
export function hasPrometheus(): boolean {
  return !spawnSync('prometheus', ['--version'], { stdio: 'ignore' }).error;
}

export interface Sample {
  readonly metric: Record<string, string>;
  readonly value: number;
}

export interface Alert {
  readonly labels: Record<string, string>;
  readonly state: 'pending' | 'firing';
}

export interface Rule {
  readonly name: string;
  readonly query: string;
  readonly health: string;
  readonly lastError?: string;
}

export interface Prometheus {
  readonly url: string;
  /** An instant query: its vector's samples. */
  query(expr: string): Promise<Sample[]>;
  /** The alerts pending or firing now (`/api/v1/alerts`). */
  alerts(): Promise<Alert[]>;
  /** Every loaded alerting rule (`/api/v1/rules`). */
  rules(): Promise<Rule[]>;
  /** Everything it wrote to stderr so far. */
  log(): string;
  stop(): Promise<void>;
}

/** Starts Prometheus with `config` as prometheus.yml and each of `ruleFiles` beside it; resolves once it is ready. */
export async function startPrometheus(
  config: object,
  ruleFiles: Record<string, object>,
): Promise<Prometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'tetraloop-prometheus-'));
  writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
  for (const [name, rules] of Object.entries(ruleFiles)) writeFileSync(join(dir, name), stringify(rules));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (err) => {
      log += String(err);
      resolve();
    });
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${path}: ${body.error ?? res.status}`);
    return body.data;
  };
  const prometheus: Prometheus = {
    url,
    async query(expr) {
      const data = await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(expr)}`,
      );
      return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
    },
    async alerts() {
      return (await api<{ alerts: Alert[] }>('/api/v1/alerts')).alerts;
    },
    async rules() {
      const data = await api<{ groups: { rules: Rule[] }[] }>('/api/v1/rules?type=alert');
      return data.groups.flatMap((g) => g.rules);
    },
    log: () => log,
    stop,
  };

  try {
    await until(
      'prometheus ready',
      async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok === true,
      {
        timeoutMs: 20_000,
        describe: () => log,
      },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return prometheus;
}

/**
 * Polls `probe` until it answers a value other than `undefined` or `false`, and answers that value;
 * past the deadline, fails with `what` and what `describe` says about the last state.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  options: { timeoutMs?: number; describe?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}\n${options.describe?.() ?? ''}`);
    // The next poll, not a wait for something to have happened: every answer is checked.
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
