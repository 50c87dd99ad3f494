/**
 * The smoke gate `.ci/run` runs: small versions of the throughput, per-hop, critical-path and api
 * benchmarks, each reduced to a ratio of two figures taken in the same run (never an absolute
 * time), held to a floor set well under the last full run's figure. A regression fails CI; the
 * noise of a shared CI machine does not. About 30 s on a quiet 2-core machine.
 *
 * Where a figure is taken more than once it is judged by its best round: a slow spell of a shared
 * machine only ever worsens some rounds, while a regression worsens them all.
 */
import { fanOut } from './support/dag.js';
import { libraryDriver } from './support/library-driver.js';
import { startBenchStack } from './support/stack.js';
import { runApi } from './api.js';
import { runCriticalPath } from './critical-path.js';
import { p50VsRaw, runPerHop } from './per-hop.js';
import {
  NODES_PER_RUN,
  batch,
  measureBatch,
  spawnWorker,
  startNoopWorkers,
  stopAll,
  waitForClients,
  type NoopWorkers,
} from './throughput.js';

/** A figure's floor: the least (`atLeast`) or the most (`atMost`) it may be. */
type Floor = { atLeast: number } | { atMost: number };

/**
 * The floors, in one place. Each sits well under the figure noted beside it (2 cores; first set
 * from `bench/results/2026-12-02T10-06-59-537Z.md` and issue 30's fan-out that day), because CI
 * machines are noisy. When the full run's figures improve, raise the floors with them, keeping the
 * margin.
 */
export const FLOORS = {
  /**
   * 0.37–0.42 in three smoke runs with wide handoff (2026-12-03; 0.28–0.31 in the last four CI
   * runs before it), 0.27–0.33 in full runs; 0.32–0.37 in the three fresh-clone CI runs after
   * (`.ci/run`). Raised from 0.12, then 0.18, then 0.22; 0.31–0.44 in the fresh-clone CI runs of
   * 2026-12-04 (worst 0.313), so 0.25 keeps a fifth of margin.
   */
  'throughput ÷ raw BullMQ': { atLeast: 0.25 },
  /**
   * 0.82–1.10 in the same smoke runs, 0.73–0.96 in full runs: with wide handoff the 1-process
   * figure rose about 25 % in nodes/s, the 2-process one about 8 %, so the ratio fell while both
   * figures rose. Lowered from 0.8, which the newest full run is below; 0.65 still fails a second
   * process that costs more than a third of the throughput (the issue's finding was half).
   * Raised to 0.75 on 2026-12-04: 0.91–1.17 in the full runs since the eighth session,
   * 0.897–1.42 in the fresh-clone CI runs of 2026-12-04; the issue's example, 0.8, would leave the
   * lowest of those a tenth of margin.
   */
  'throughput 2 tool processes ÷ 1': { atLeast: 0.75 },
  /** 1.54: 0.73 against 0.47 ms. */
  'per-hop p50 ÷ raw BullMQ': { atMost: 2.5 },
  /**
   * 1.47 on a quiet machine, 1.31–1.38 in the smoke's best rounds; 1.75–2.1 in full runs while
   * other work shared the 2 CPUs. 1.27–1.40 in the three fresh-clone CI runs of 2026-12-03, where
   * the gate runs after the tests, alone: lowered from 2.0 to the issue's 1.8. 1.23–1.27 in the
   * fresh-clone CI runs of 2026-12-04, with carrier jobs: lowered to 1.6.
   */
  'fan-out 32 × 100 ms, wall ÷ critical path': { atMost: 1.6 },
  /**
   * 0.39, the median of three rounds; 0.40–0.47 in the smoke, 0.29 with a core taken by other work;
   * 0.50–0.57 in the three fresh-clone CI runs of 2026-12-03. Raised from 0.25 to the issue's 0.3.
   */
  'API accept ÷ bare Express': { atLeast: 0.3 },
} satisfies Record<string, Floor>;

export type Figure = keyof typeof FLOORS;

/** Runs per measured throughput batch (× 10 nodes; raw BullMQ gets as many jobs). */
const THROUGHPUT_RUNS = 100;
/** Before each setup's rounds: scripts loaded and code compiled in every process. */
const THROUGHPUT_WARM_UP_RUNS = 30;
const THROUGHPUT_ROUNDS = 2;
/** Runs of the fan-out, about 300 ms each. */
const FAN_OUT_REPEATS = 7;
/** autocannon samples once a second and stops on a sample: whole seconds only. */
const API = { durationSeconds: 1, rounds: 4, read: false, profile: false };

export interface SmokeResult {
  figures: Record<Figure, number>;
  /** One line per figure that misses its floor. */
  failures: string[];
  /** Seconds each part took (its attempts together), and in all. */
  seconds: Record<string, number>;
  /** How often each part was measured. */
  attempts: Record<string, number>;
  settings: Record<string, unknown>;
}

/**
 * Throughput through the library with 1 tool process, against raw BullMQ with 1 no-op process
 * (the two take turns, round after round), then with a second tool process started beside it.
 */
async function throughputRatios(
  log: (line: string) => void,
): Promise<Pick<Record<Figure, number>, 'throughput ÷ raw BullMQ' | 'throughput 2 tool processes ÷ 1'>> {
  const stack = await startBenchStack({}, { pools: [] });
  const redisUrl = stack.env.REDIS_URL!;
  const library = libraryDriver(stack.api);
  const plan = spawnWorker(stack, 'plan');
  const tools = [spawnWorker(stack, 'tool')];
  let noop: NoopWorkers | undefined;
  const groups = (): Record<string, number[]> => ({
    driver: [process.pid],
    plan: [plan.pid!],
    workers: tools.map((t) => t.pid!),
    redis: [stack.redis.pid],
  });
  const rounds = async (name: string, each: () => Promise<void>): Promise<void> => {
    await batch(library, THROUGHPUT_WARM_UP_RUNS, stack);
    for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
      log(`  throughput ${name}, round ${round + 1}`);
      await each();
    }
  };
  // Where the part's time goes past its measured batches (a process start, a shutdown), logged so
  // a slow gate in CI says which.
  const since = performance.now();
  const took = (): string => `${((performance.now() - since) / 1000).toFixed(1)} s`;
  try {
    // The no-op workers start while Tetraloop's do.
    noop = await startNoopWorkers(redisUrl, 1);
    await waitForClients(redisUrl, [plan.pid!, tools[0]!.pid!]);
    log(`  workers connected (${took()})`);
    const one: number[] = [];
    const vsRaw: number[] = [];
    await rounds('1 tool process', async () => {
      const tetraloop = await measureBatch(stack, groups(), library, THROUGHPUT_RUNS, 'smoke-1');
      const raw = await noop!.measure(THROUGHPUT_RUNS * NODES_PER_RUN, stack.redis.pid);
      log(`    Tetraloop ${tetraloop.perSecond} nodes/s, raw BullMQ ${raw.perSecond} jobs/s`);
      one.push(tetraloop.perSecond);
      vsRaw.push(tetraloop.perSecond / raw.perSecond);
    });
    tools.push(spawnWorker(stack, 'tool'));
    await waitForClients(redisUrl, [tools[1]!.pid!]);
    log(`  second tool process connected (${took()})`);
    const two: number[] = [];
    await rounds('2 tool processes', async () => {
      const tetraloop = await measureBatch(stack, groups(), library, THROUGHPUT_RUNS, 'smoke-2');
      log(`    Tetraloop ${tetraloop.perSecond} nodes/s`);
      two.push(tetraloop.perSecond);
    });
    return {
      'throughput ÷ raw BullMQ': Math.max(...vsRaw),
      'throughput 2 tool processes ÷ 1': Math.max(...two) / Math.max(...one),
    };
  } finally {
    log(`  measured (${took()}); stopping the workers`);
    await stopAll([plan, ...tools]);
    await noop?.close();
    await stack.close();
    log(`  stopped (${took()})`);
  }
}

/** Whether `value` misses `floor`, and the floor in words. */
const judge = (value: number, floor: Floor): { missed: boolean; words: string } =>
  'atLeast' in floor
    ? { missed: value < floor.atLeast, words: `≥ ${floor.atLeast}` }
    : { missed: value > floor.atMost, words: `≤ ${floor.atMost}` };

/** The better of two values of a figure: the higher where its floor is a minimum, else the lower. */
const better = (figure: Figure, a: number | undefined, b: number): number =>
  a === undefined ? b : 'atLeast' in FLOORS[figure] ? Math.max(a, b) : Math.min(a, b);

type Figures = Partial<Record<Figure, number>>;

const PER_HOP = { hops: 200, repeats: 3, langGraph: false };

/** The gate's parts, in the order they run: each a small benchmark giving one or two figures. */
const PARTS: Record<string, (log: (line: string) => void) => Promise<Figures>> = {
  throughput: throughputRatios,
  'per-hop': async (log) => ({ 'per-hop p50 ÷ raw BullMQ': p50VsRaw(await runPerHop(log, PER_HOP)) }),
  'fan-out': async (log) => {
    const { rows } = await runCriticalPath(log, {
      shapes: [fanOut(32, 100)],
      repeats: FAN_OUT_REPEATS,
      comparisons: false,
    });
    const row = rows[0]!;
    return {
      'fan-out 32 × 100 ms, wall ÷ critical path': Math.min(...row.tetraloopRunsMs) / row.lowerBoundMs,
    };
  },
  api: async (log) => {
    const api = await runApi(log, API);
    // A ratio taken from error answers would measure nothing: an error is a failure, not noise.
    const refused = api.rows.reduce((sum, r) => sum + r.non2xx + r.errors, 0);
    if (refused > 0) throw new Error(`smoke: ${refused} API requests answered non-2xx or failed`);
    return { 'API accept ÷ bare Express': Math.max(...api.perRoundAcceptRatios) };
  },
};

/**
 * How often a part is measured before a figure of it fails: a part with a figure past its floor
 * is measured once more and the better value counts, since a spell of load lasting a whole part
 * (a test suite beside it) is common on a shared CI machine and rarely lasts two.
 */
const ATTEMPTS = 2;

export async function runSmoke(log: (line: string) => void = console.log): Promise<SmokeResult> {
  const seconds: Record<string, number> = {};
  const attempts: Record<string, number> = {};
  const figures: Figures = {};
  const started = performance.now();
  for (const [part, measure] of Object.entries(PARTS)) {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const from = performance.now();
      const measured = await measure(log);
      seconds[part] = Number(((seconds[part] ?? 0) + (performance.now() - from) / 1000).toFixed(1));
      attempts[part] = attempt;
      const missed: string[] = [];
      for (const [figure, value] of Object.entries(measured) as [Figure, number][]) {
        figures[figure] = better(figure, figures[figure], value);
        if (judge(figures[figure], FLOORS[figure]).missed) missed.push(`${figure} ${value.toFixed(3)}`);
      }
      if (missed.length === 0) break;
      if (attempt < ATTEMPTS) log(`  missed its floor: ${missed.join(', ')}; measuring ${part} once more`);
    }
  }
  seconds.total = Number(((performance.now() - started) / 1000).toFixed(1));
  const failures: string[] = [];
  for (const [figure, value] of Object.entries(figures) as [Figure, number][]) {
    const { missed, words } = judge(value, FLOORS[figure]);
    if (missed) failures.push(`smoke: ${figure} is ${value.toFixed(3)}, which misses its floor ${words}`);
  }
  return {
    figures: figures as Record<Figure, number>,
    failures,
    seconds,
    attempts,
    settings: {
      throughput: {
        runs: THROUGHPUT_RUNS,
        nodesPerRun: NODES_PER_RUN,
        warmUpRuns: THROUGHPUT_WARM_UP_RUNS,
        rounds: THROUGHPUT_ROUNDS,
      },
      perHop: PER_HOP,
      fanOut: { shape: '32 × 100 ms → join', repeats: FAN_OUT_REPEATS },
      api: API,
      attempts: ATTEMPTS,
    },
  };
}

export function smokeTable(result: SmokeResult): string {
  const lines = ['| figure | this run | floor | |', '|---|---:|---|---|'];
  for (const [figure, value] of Object.entries(result.figures) as [Figure, number][]) {
    const { missed, words } = judge(value, FLOORS[figure]);
    lines.push(`| ${figure} | ${value.toFixed(3)} | ${words} | ${missed ? '**missed**' : 'ok'} |`);
  }
  const again = Object.entries(result.attempts).filter(([, n]) => n > 1);
  if (again.length > 0)
    lines.push('', `Measured twice, the better value counting: ${again.map(([part]) => part).join(', ')}.`);
  lines.push(
    '',
    `Seconds: ${Object.entries(result.seconds)
      .map(([part, s]) => `${part} ${s}`)
      .join(', ')}.`,
  );
  return lines.join('\n');
}
