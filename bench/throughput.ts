/**
 * Throughput: 500 runs of a 10-node graph of fast `json` nodes (one source → 8 parallel → one
 * join) submitted at once, started and settled by one `tetraloop worker --pool plan` process and
 * executed by 1, 2 and then 4 `tetraloop worker --pool tool` processes; beside raw BullMQ no-op
 * jobs in as many child processes at the same concurrency on the same Redis. That sequence is
 * measured in rounds (BENCH_THROUGHPUT_ROUNDS, 3 by default), the systems taking turns in each: on
 * a shared machine one batch can be a third off the next, so each figure is the median round's
 * and each ratio the median of the rounds' own ratios.
 *
 * Runs are submitted two ways: through the library (`RunService.submit`, as the API's handler
 * calls it, and the run waiter) — the counterpart of a BullMQ producer calling `Queue.addBulk` —
 * and through the HTTP API (POST /v1/runs, then GET /v1/runs/:id/wait). The CPU time of every
 * process is read from /proc, so each figure comes with where the time went.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { RunRequest } from '@tetraloop/client';
import { BASE_SETTINGS } from '@tetraloop/core/config';
import { commandCounts, cpuDuring, profiled } from './support/cpu.js';
import { libraryDriver, type LibraryDriver } from './support/library-driver.js';
import { profileRedis, profileTable, type ProfileRow } from './support/redis-profile.js';
import { clientOf, median, queuesDrained, startBenchStack, type BenchStack } from './support/stack.js';

const RUNS = 500;
export const NODES_PER_RUN = 10;
const CONCURRENCY = 32;
/** Tool-worker processes (and raw BullMQ no-op processes) measured, one setup after the other. */
const PROCESS_COUNTS = [1, 2, 4];
/** Runs (and as many no-op jobs per node) of the batch profiled under MONITOR, apart from the measured one. */
const PROFILE_RUNS = 50;
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * CPU ms per node or job, by process. `driver`: this process (the submitting client, and the API
 * when runs go through HTTP; BullMQ: the producer); `plan`: Tetraloop's plan-pool process (starts
 * and settles runs); `workers`: the tool or no-op worker processes.
 */
export interface CpuSplit {
  driver: number | null;
  plan: number | null;
  workers: number | null;
  redis: number | null;
}

export interface Measured {
  seconds: number;
  perSecond: number;
  cpuMs: CpuSplit;
  /** Per node or job: write system calls of every process measured (the socket writes), or null off Linux. */
  writeCalls: number | null;
  /** Per node or job: Redis commands executed (those run inside scripts included), script calls among the commands sent, and Redis CPU µs by INFO commandstats. */
  redis: { commands: number; scripts: number; usec: number };
}

/** Runs `work` and reports the Redis commands it caused per item. */
async function redisPerItem<T>(
  redisUrl: string,
  items: number,
  work: () => Promise<T>,
): Promise<{ result: T; redis: Measured['redis'] }> {
  const client = new Redis(redisUrl);
  try {
    const info = (): Promise<string> => client.info('commandstats');
    const before = await commandCounts(info);
    const result = await work();
    const after = await commandCounts(info);
    const per = (a: number, b: number): number => Number(((a - b) / items).toFixed(2));
    return {
      result,
      redis: {
        commands: per(after.commands, before.commands),
        scripts: per(after.scripts, before.scripts),
        usec: per(after.usec, before.usec),
      },
    };
  } finally {
    client.disconnect();
  }
}

export interface ThroughputRow {
  processes: number;
  runs: number;
  nodes: number;
  /** Tetraloop, runs submitted through the library. */
  library: Measured;
  /** Tetraloop, runs submitted through the HTTP API. */
  http: Measured;
  bullmq: Measured;
}

export interface ThroughputResult {
  /** Per process count, each system's median batch of the rounds (by nodes or jobs per second). */
  rows: ThroughputRow[];
  /** Every round's rows, in the order measured. */
  rounds: ThroughputRow[][];
  /** Where the Redis commands go, per node and per no-op job (1 tool process, library). */
  profile: { tetraloop: ProfileRow[]; bullmq: ProfileRow[] };
  settings: Record<string, unknown>;
}

/** A run of NODES_PER_RUN fast `json` nodes: one source, the rest in parallel, one join. */
export function graph(): { nodes: Record<string, unknown>[]; edges: [string, string][] } {
  const middle = Array.from({ length: NODES_PER_RUN - 2 }, (_, i) => `m${i}`);
  return {
    nodes: [
      { id: 'src', kind: 'tool', tool: 'json', args: { value: { n: 1 } } },
      ...middle.map((id) => ({ id, kind: 'tool', tool: 'json', args: { value: { $ref: 'src.output' } } })),
      {
        id: 'join',
        kind: 'tool',
        tool: 'json',
        args: { value: middle.map((m) => ({ $ref: `${m}.output.n` })) },
      },
    ],
    edges: [
      ...middle.map((m) => ['src', m] as [string, string]),
      ...middle.map((m) => [m, 'join'] as [string, string]),
    ],
  };
}

/** With BENCH_CPU_PROF=<dir>, each worker process writes a V8 CPU profile there when it exits. */
const profileFlags = (): string[] =>
  process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];

/** Stops child processes: SIGTERM, then SIGKILL after 10 s. */
export async function stopAll(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

/** Write system calls per item, over every process measured. */
const writesPerItem = (writeCalls: Record<string, number | null>, items: number): number | null => {
  const values = Object.values(writeCalls);
  if (values.some((v) => v === null)) return null;
  return Number((values.reduce((a, b) => a! + b!, 0)! / items).toFixed(2));
};

const perItem = (cpuMs: Record<string, number | null>, items: number): CpuSplit => {
  const per = (v: number | null | undefined): number | null =>
    v == null ? null : Number((v / items).toFixed(3));
  return {
    driver: per(cpuMs.driver),
    plan: per(cpuMs.plan ?? 0),
    workers: per(cpuMs.workers),
    redis: per(cpuMs.redis),
  };
};

/** One way of submitting a run and waiting for it to settle. */
export interface Submitter {
  submit(body: unknown): Promise<string>;
  settle(runId: string): Promise<string>;
}

function httpSubmitter(url: string): Submitter {
  const client = clientOf(url);
  return {
    submit: async (body) => (await client.submit(body as RunRequest)).runId,
    settle: async (runId) => (await client.wait(runId, Infinity, { sliceMs: 60_000 })).status,
  };
}

/** Submits `runs` runs at once and waits for all of them; returns the seconds taken. */
export async function batch(submitter: Submitter, runs: number, stack: BenchStack): Promise<number> {
  const body = { graph: graph() };
  const started = performance.now();
  const ids = await Promise.all(Array.from({ length: runs }, () => submitter.submit(body)));
  const statuses = await Promise.all(ids.map((id) => submitter.settle(id)));
  // The jobs' own ends (the last node's job, the root job's last pass) are the batch's work too.
  await queuesDrained(stack);
  const seconds = (performance.now() - started) / 1000;
  const failed = statuses.filter((s) => s !== 'succeeded');
  if (failed.length > 0) throw new Error(`${failed.length} runs did not succeed, e.g. ${failed[0]}`);
  return seconds;
}

/** Resolves once every process of `pids` has its Redis connections open (named by the worker's pid). */
export async function waitForClients(redisUrl: string, pids: readonly number[]): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
      const list = (await redis.client('LIST')) as string;
      if (pids.every((pid) => list.includes(`tetraloop-worker-${pid}`))) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('workers did not connect within 60 s');
  } finally {
    redis.disconnect();
  }
}

/**
 * A `tetraloop worker --pool <pool>` child process on the stack's Redis, its tool pool at
 * `toolConcurrency` (this benchmark's by default).
 */
export function spawnWorker(
  stack: BenchStack,
  pool: 'plan' | 'tool',
  toolConcurrency = CONCURRENCY,
): ChildProcess {
  return spawn(
    process.execPath,
    [...profileFlags(), 'apps/cli/bin/tetraloop.mjs', 'worker', '--pool', pool],
    {
      cwd: ROOT,
      env: { ...process.env, ...stack.env, TETRALOOP_TOOL_CONCURRENCY: String(toolConcurrency) },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
}

/**
 * One measured batch of `runs` runs through `submitter`: nodes/s, the CPU of each process group
 * and the Redis commands per node. `name` names the batch's CPU profile (BENCH_CPU_PROF).
 */
export async function measureBatch(
  stack: BenchStack,
  groups: Record<string, readonly number[]>,
  submitter: Submitter,
  runs: number,
  name: string,
): Promise<Measured> {
  const nodes = runs * NODES_PER_RUN;
  const {
    result: { result: seconds, cpuMs, writeCalls },
    redis,
  } = await redisPerItem(stack.env.REDIS_URL!, nodes, () =>
    cpuDuring(groups, () => profiled(name, () => batch(submitter, runs, stack))),
  );
  return {
    seconds: Number(seconds.toFixed(2)),
    perSecond: Math.round(nodes / seconds),
    cpuMs: perItem(cpuMs, nodes),
    writeCalls: writesPerItem(writeCalls, nodes),
    redis,
  };
}

async function tetraloopWith(
  stack: BenchStack,
  library: LibraryDriver,
  processes: number,
  profile: boolean,
): Promise<{ library: Measured; http: Measured; profile?: ProfileRow[] }> {
  const planner = spawnWorker(stack, 'plan');
  const children = Array.from({ length: processes }, () => spawnWorker(stack, 'tool'));
  const groups = {
    driver: [process.pid],
    plan: [planner.pid!],
    workers: children.map((c) => c.pid!),
    redis: [stack.redis.pid],
  };
  const http = httpSubmitter(stack.url);
  const measure = (name: string, submitter: Submitter): Promise<Measured> =>
    measureBatch(stack, groups, submitter, RUNS, `driver-${name}-${processes}`);
  try {
    await waitForClients(stack.env.REDIS_URL!, [planner.pid!, ...children.map((c) => c.pid!)]);
    // Warm-up: scripts loaded and code compiled in every process, for both ways in.
    await batch(library, 20, stack);
    await batch(http, 20, stack);
    const measured = { library: await measure('library', library), http: await measure('http', http) };
    if (!profile) return measured;
    const { rows } = await profileRedis(stack.env.REDIS_URL!, PROFILE_RUNS * NODES_PER_RUN, () =>
      batch(library, PROFILE_RUNS, stack),
    );
    return { ...measured, profile: rows };
  } finally {
    await stopAll([planner, ...children]);
  }
}

/** Raw BullMQ no-op worker processes on a queue of their own, and a producer for them. */
export interface NoopWorkers {
  /** Adds `count` no-op jobs and resolves once all of them completed; the seconds taken. */
  run(count: number, tag: string): Promise<number>;
  /** One measured batch of `jobs` jobs: jobs/s, the CPU of each process and the Redis commands per job. */
  measure(jobs: number, redisPid: number): Promise<Measured>;
  close(): Promise<void>;
}

/** Starts `processes` no-op worker processes at CONCURRENCY each; resolves once all are ready and warm. */
export async function startNoopWorkers(redisUrl: string, processes: number): Promise<NoopWorkers> {
  const prefix = `bench-noop-${processes}-${process.pid}`;
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue('noop', { connection, prefix });
  const children = Array.from({ length: processes }, () =>
    spawn(process.execPath, ['--import', 'tsx', 'bench/support/noop-worker.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        REDIS_URL: redisUrl,
        BENCH_PREFIX: prefix,
        BENCH_CONCURRENCY: String(CONCURRENCY),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const close = async (): Promise<void> => {
    await stopAll(children);
    await queue.close();
    connection.disconnect();
  };
  const run = async (count: number, tag: string): Promise<number> => {
    const started = performance.now();
    for (let i = 0; i < count; i += 500) {
      const n = Math.min(500, count - i);
      await queue.addBulk(
        Array.from({ length: n }, (_, k) => ({
          name: 'noop',
          data: { i: i + k },
          opts: { jobId: `${tag}.${i + k}` },
        })),
      );
    }
    for (;;) {
      const { completed = 0 } = await queue.getJobCounts('completed');
      if (completed >= count) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    return (performance.now() - started) / 1000;
  };
  // Completed jobs removed, so the next batch's count is its own.
  const clean = async (): Promise<void> => {
    await queue.clean(0, 100_000, 'completed');
  };
  // Job ids are unique per measured batch, so batches can follow one another on one queue.
  let batches = 0;
  try {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve, reject) => {
            c.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve());
            c.on('exit', (code) => reject(new Error(`noop worker exited with ${code}`)));
          }),
      ),
    );
    await run(200, 'warm');
    await clean();
  } catch (err) {
    await close();
    throw err;
  }
  return {
    run,
    async measure(jobs, redisPid) {
      const tag = `bench${batches++ || ''}`;
      const {
        result: { result: seconds, cpuMs, writeCalls },
        redis,
      } = await redisPerItem(redisUrl, jobs, () =>
        cpuDuring({ driver: [process.pid], workers: children.map((c) => c.pid!), redis: [redisPid] }, () =>
          run(jobs, tag),
        ),
      );
      await clean();
      return {
        seconds: Number(seconds.toFixed(2)),
        perSecond: Math.round(jobs / seconds),
        cpuMs: perItem(cpuMs, jobs),
        writeCalls: writesPerItem(writeCalls, jobs),
        redis,
      };
    },
    close,
  };
}

async function bullmqWith(
  redisUrl: string,
  redisPid: number,
  processes: number,
  jobs: number,
  profile: boolean,
): Promise<Measured & { profile?: ProfileRow[] }> {
  const noop = await startNoopWorkers(redisUrl, processes);
  try {
    const measured = await noop.measure(jobs, redisPid);
    if (!profile) return measured;
    const profiled = PROFILE_RUNS * NODES_PER_RUN;
    const { rows } = await profileRedis(redisUrl, profiled, () => noop.run(profiled, 'profile'));
    return { ...measured, profile: rows };
  } finally {
    await noop.close();
  }
}

export async function runThroughput(log: (line: string) => void = console.log): Promise<ThroughputResult> {
  const stack = await startBenchStack({}, { pools: [] });
  const library = libraryDriver(stack.api);
  const measured: ThroughputRow[][] = [];
  const profile: ThroughputResult['profile'] = { tetraloop: [], bullmq: [] };
  const nodes = RUNS * NODES_PER_RUN;
  const rounds = roundsOf(process.env.BENCH_THROUGHPUT_ROUNDS);
  try {
    for (let round = 1; round <= rounds; round++) {
      const rows: ThroughputRow[] = [];
      for (const processes of PROCESS_COUNTS) {
        // Profiled under MONITOR once: in the first round, with one process.
        const first = round === 1 && processes === PROCESS_COUNTS[0];
        const { profile: tetraloopProfile, ...tetraloop } = await tetraloopWith(
          stack,
          library,
          processes,
          first,
        );
        const { profile: bullmqProfile, ...bullmq } = await bullmqWith(
          stack.env.REDIS_URL!,
          stack.redis.pid,
          processes,
          nodes,
          first,
        );
        if (tetraloopProfile) profile.tetraloop = tetraloopProfile;
        if (bullmqProfile) profile.bullmq = bullmqProfile;
        const row: ThroughputRow = { processes, runs: RUNS, nodes, ...tetraloop, bullmq };
        rows.push(row);
        log(
          `  round ${round}, ${processes} tool process(es): Tetraloop ${row.library.perSecond} nodes/s via the library, ${row.http.perSecond} via HTTP; raw BullMQ ${row.bullmq.perSecond} jobs/s`,
        );
      }
      measured.push(rows);
    }
  } finally {
    await stack.close();
  }
  return {
    rows: medianRows(measured),
    rounds: measured,
    profile,
    settings: {
      runs: RUNS,
      rounds,
      nodesPerRun: NODES_PER_RUN,
      graph: 'src → 8 parallel → join, all json tool nodes',
      concurrencyPerProcess: CONCURRENCY,
      // The handoff width the worker processes read, as they read it (the setting or its default).
      handoffWidth: BASE_SETTINGS.TETRALOOP_NODE_HANDOFF_WIDTH.schema.parse(
        process.env.TETRALOOP_NODE_HANDOFF_WIDTH,
      ),
      planPool: 'one `tetraloop worker --pool plan` process',
      api: 'in the bench process, with the HTTP client',
    },
  };
}

/** How many times the whole sequence is measured: BENCH_THROUGHPUT_ROUNDS, 3 when unset or empty. */
function roundsOf(value: string | undefined): number {
  const rounds = value === undefined || value === '' ? 3 : Number(value);
  if (!Number.isInteger(rounds) || rounds < 1) {
    throw new Error(`BENCH_THROUGHPUT_ROUNDS must be a whole number of at least 1, not ${value}`);
  }
  return rounds;
}

/** The middle item by `key` (of an even count, the lower of the two middle ones: a batch measured). */
const middle = <T>(items: readonly T[], key: (item: T) => number): T =>
  [...items].sort((a, b) => key(a) - key(b))[Math.floor((items.length - 1) / 2)]!;

/**
 * Per process count, each system's median batch over the rounds: a batch measured as it was, so
 * its CPU split and commands are those of the rate shown.
 */
function medianRows(rounds: readonly ThroughputRow[][]): ThroughputRow[] {
  return PROCESS_COUNTS.map((processes) => {
    const measured = rounds.map((rows) => rows.find((r) => r.processes === processes)!);
    const medianBatch = (system: 'library' | 'http' | 'bullmq'): Measured =>
      middle(
        measured.map((r) => r[system]),
        (m) => m.perSecond,
      );
    return {
      ...measured[0]!,
      library: medianBatch('library'),
      http: medianBatch('http'),
      bullmq: medianBatch('bullmq'),
    };
  });
}

const totalCpu = (c: CpuSplit): number | null =>
  c.driver === null || c.plan === null || c.workers === null || c.redis === null
    ? null
    : c.driver + c.plan + c.workers + c.redis;

/**
 * The ratios issue 30's targets read, one per round, each from batches of the same round: Tetraloop
 * (library) ÷ raw BullMQ with one process; 2 processes ÷ 1 for each system; and how much more CPU a
 * node (a job) took in all processes with 2 than with 1.
 */
export interface RoundRatios {
  throughput: number;
  scale: number;
  bullmqScale: number;
  cpuWith2: number | null;
  bullmqCpuWith2: number | null;
}

export function roundRatios(rows: readonly ThroughputRow[]): RoundRatios {
  const one = rows.find((r) => r.processes === 1)!;
  const two = rows.find((r) => r.processes === 2)!;
  const growth = (a: CpuSplit, b: CpuSplit): number | null => {
    const [x, y] = [totalCpu(a), totalCpu(b)];
    return x === null || y === null ? null : y / x - 1;
  };
  return {
    throughput: one.library.perSecond / one.bullmq.perSecond,
    scale: two.library.perSecond / one.library.perSecond,
    bullmqScale: two.bullmq.perSecond / one.bullmq.perSecond,
    cpuWith2: growth(one.library.cpuMs, two.library.cpuMs),
    bullmqCpuWith2: growth(one.bullmq.cpuMs, two.bullmq.cpuMs),
  };
}

const total = (c: CpuSplit): string => totalCpu(c)?.toFixed(3) ?? 'n/a';
const cell = (v: number | null): string => (v === null ? 'n/a' : v.toFixed(3));

export function throughputTable(result: ThroughputResult): string {
  const rounds = result.rounds.length;
  const counts = result.rows.map((r) => r.processes);
  const lines = [
    `Each system's median batch of ${rounds} round(s); in each round ${counts.slice(0, -1).join(', ')} and ${counts.at(-1)} tool processes were measured, each beside raw BullMQ with as many processes. The ratios in this table are of those medians, which may come from different rounds; the table after it gives each round's own.`,
    '',
    '| tool-worker processes | Tetraloop nodes/s (library) | Tetraloop nodes/s (HTTP API) | raw BullMQ jobs/s | library ÷ BullMQ | HTTP ÷ BullMQ |',
    '|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of result.rows) {
    lines.push(
      `| ${r.processes} | ${r.library.perSecond} | ${r.http.perSecond} | ${r.bullmq.perSecond} | ${(r.library.perSecond / r.bullmq.perSecond).toFixed(2)} | ${(r.http.perSecond / r.bullmq.perSecond).toFixed(2)} |`,
    );
  }
  const ratios = result.rounds.map(roundRatios);
  const ratio = (v: number): string => v.toFixed(2);
  const growth = (v: number | null): string => {
    if (v === null) return 'n/a';
    const percent = Math.round(v * 100);
    return `${percent > 0 ? '+' : ''}${percent === 0 ? 0 : percent} %`;
  };
  const medianOfRounds = (key: keyof RoundRatios): number | null => {
    const values = ratios.map((r) => r[key]).filter((v): v is number => v !== null);
    return values.length === 0 ? null : median(values);
  };
  lines.push(
    '',
    "Issue 30's ratios, each from the batches of one round (Tetraloop through the library), and their medians (of an even count of rounds, the mean of the two middle ones):",
    '',
    '| round | Tetraloop ÷ raw BullMQ, 1 process | 2 processes ÷ 1, Tetraloop | 2 ÷ 1, raw BullMQ | CPU per node with 2 vs 1, Tetraloop | CPU per job with 2 vs 1, raw BullMQ |',
    '|---|---:|---:|---:|---:|---:|',
    ...ratios.map(
      (r, i) =>
        `| ${i + 1} | ${ratio(r.throughput)} | ${ratio(r.scale)} | ${ratio(r.bullmqScale)} | ${growth(r.cpuWith2)} | ${growth(r.bullmqCpuWith2)} |`,
    ),
    `| **median** | **${ratio(medianOfRounds('throughput')!)}** | **${ratio(medianOfRounds('scale')!)}** | ${ratio(medianOfRounds('bullmqScale')!)} | **${growth(medianOfRounds('cpuWith2'))}** | ${growth(medianOfRounds('bullmqCpuWith2'))} |`,
    '',
    `${RUNS} runs × ${NODES_PER_RUN} nodes = ${RUNS * NODES_PER_RUN} nodes against as many no-op jobs. Per node (Tetraloop) and per job (raw BullMQ): CPU milliseconds by process and the write system calls of all of them (\`syscw\`: each socket write, and any file write; how many commands share a write depends on how much work overlaps), read from /proc, and Redis commands (those run inside Lua scripts included) from INFO commandstats:`,
    '',
    '| tool-worker processes | system | driver (this process) | plan pool | workers | redis-server | total | write calls | Redis commands | script calls | Redis CPU µs (commandstats) |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const r of result.rows) {
    for (const [system, m] of [
      ['Tetraloop via the library (driver: RunService)', r.library],
      ['Tetraloop via HTTP (driver: HTTP client and API)', r.http],
      ['raw BullMQ (driver: producer)', r.bullmq],
    ] as const) {
      const c = m.cpuMs;
      lines.push(
        `| ${r.processes} | ${system} | ${cell(c.driver)} | ${cell(c.plan)} | ${cell(c.workers)} | ${cell(c.redis)} | ${total(c)} | ${cell(m.writeCalls)} | ${m.redis.commands} | ${m.redis.scripts} | ${m.redis.usec} |`,
      );
    }
  }
  lines.push(
    '',
    `Where the Redis commands go: a batch of ${PROFILE_RUNS} runs (1 tool process, library) and ${PROFILE_RUNS * NODES_PER_RUN} no-op jobs, apart from the measured ones, every command read with MONITOR and counted by what sent it, per node (per job). A script's commands are its call and every command it ran.`,
    '',
    profileTable(result.profile.tetraloop, 'node'),
    '',
    profileTable(result.profile.bullmq, 'job'),
  );
  return lines.join('\n');
}

/**
 * Nodes/s against tool-worker processes (Tetraloop through the library and through HTTP) beside
 * raw BullMQ's jobs/s against its no-op processes: a hand-written SVG line chart, linear axes.
 */
export function throughputSvg(rows: readonly ThroughputRow[]): string {
  const series = [
    { label: 'Tetraloop (library)', color: '#2563eb', value: (r: ThroughputRow) => r.library.perSecond },
    { label: 'Tetraloop (HTTP API)', color: '#16a34a', value: (r: ThroughputRow) => r.http.perSecond },
    { label: 'raw BullMQ (no-op jobs)', color: '#f59e0b', value: (r: ThroughputRow) => r.bullmq.perSecond },
  ];
  const left = 70;
  const top = 40;
  const plotWidth = 420;
  const plotHeight = 260;
  const width = left + plotWidth + 30;
  const height = top + plotHeight + 80;
  const maxProcesses = Math.max(...rows.map((r) => r.processes));
  const maxValue = Math.max(1, ...rows.flatMap((r) => series.map((s) => s.value(r))));
  // About five gridlines, at a round step (1, 2 or 5 × a power of ten).
  const magnitude = 10 ** Math.floor(Math.log10(maxValue / 5));
  const step = magnitude * ([1, 2, 5].find((m) => (maxValue * 1.1) / (m * magnitude) <= 6) ?? 10);
  const yMax = Math.ceil((maxValue * 1.1) / step) * step;
  const x = (processes: number): number =>
    left + ((processes - 1) / Math.max(1, maxProcesses - 1)) * plotWidth;
  const y = (v: number): number => top + plotHeight - (v / yMax) * plotHeight;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${left}" y="18" font-size="14" font-weight="bold">Throughput against worker processes (higher is better)</text>`,
  ];
  for (let tick = 0; tick <= yMax; tick += step) {
    parts.push(
      `<line x1="${left}" x2="${left + plotWidth}" y1="${y(tick)}" y2="${y(tick)}" stroke="#e5e7eb"/>`,
      `<text x="${left - 6}" y="${y(tick) + 4}" text-anchor="end">${tick}</text>`,
    );
  }
  for (const r of rows) {
    parts.push(
      `<text x="${x(r.processes)}" y="${top + plotHeight + 16}" text-anchor="middle">${r.processes}</text>`,
    );
  }
  parts.push(
    `<text x="${left + plotWidth / 2}" y="${top + plotHeight + 32}" text-anchor="middle">worker processes</text>`,
    `<text x="14" y="${top + plotHeight / 2}" text-anchor="middle" transform="rotate(-90 14 ${top + plotHeight / 2})">nodes/s (jobs/s for raw BullMQ)</text>`,
    `<line x1="${left}" x2="${left + plotWidth}" y1="${top + plotHeight}" y2="${top + plotHeight}" stroke="black"/>`,
  );
  series.forEach((s, j) => {
    const points = rows.map((r) => `${x(r.processes)},${y(s.value(r))}`).join(' ');
    parts.push(`<polyline points="${points}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
    for (const r of rows) {
      parts.push(
        `<circle cx="${x(r.processes)}" cy="${y(s.value(r))}" r="3.5" fill="${s.color}"><title>${s.label}, ${r.processes} process(es): ${s.value(r)}/s</title></circle>`,
      );
    }
    const lx = left + j * 150;
    parts.push(
      `<rect x="${lx}" y="${height - 18}" width="12" height="12" fill="${s.color}"/>`,
      `<text x="${lx + 16}" y="${height - 8}">${s.label}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
