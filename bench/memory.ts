/**
 * Memory: Redis `used_memory` per completed run while settled runs are retained (the default
 * retention keeps them 7 days, then their keys expire), and the RSS and V8 heap of a worker
 * process running the plan and tool pools, after a forced GC, before and after 5,000 runs. The
 * baseline is taken after 1,000 warm-up runs, once the worker's plan caches (1,000 plans per
 * pool) are full; a leak shows as growth from there.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { nodeJobId, runJobId } from '@tetraloop/core/queues';
import { runKeys } from '@tetraloop/core/state';
import { libraryDriver, type LibraryDriver } from './support/library-driver.js';
import { startBenchStack } from './support/stack.js';

const REDIS_RUNS = 300;
const WARMUP_RUNS = 1000;
const RSS_RUNS = 5000;
const SAMPLE_EVERY = 1000;
const BATCH = 100;
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BODY = { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: { n: 1 } } }] } };

export interface MemorySample {
  runs: number;
  rssMiB: number;
  heapUsedMiB: number;
}

export interface MemoryResult {
  redisRuns: number;
  redisUsedBefore: number;
  redisUsedAfter: number;
  redisBytesPerRun: number;
  /** MEMORY USAGE of one settled run's keys, by key (the run's own and its BullMQ jobs). */
  redisBreakdown: Record<string, number>;
  rssRuns: number;
  /** Worker RSS and heap after the warm-up, then every SAMPLE_EVERY runs. */
  samples: MemorySample[];
  rssGrowthPercent: number;
  heapGrowthPercent: number;
  settings: Record<string, unknown>;
}

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

/** Bytes Redis holds for one settled run, key by key. */
async function breakdown(redis: Redis, prefix: string, runId: string): Promise<Record<string, number>> {
  const keys = runKeys(prefix, runId);
  const named: [string, string][] = [
    ['run: meta (record, graph, plan, input, output)', keys.meta],
    ['run: node snapshots', keys.nodes],
    ['run: event stream', keys.events],
    ['run: bookkeeping (aux)', keys.aux],
    ['BullMQ: root job (plan queue)', `${prefix}:plan:${runJobId(runId)}`],
    ['BullMQ: node job (tool queue)', `${prefix}:tool:${nodeJobId(runId, 'a')}`],
  ];
  const sizes = await Promise.all(
    named.map(async ([, key]) => Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0)),
  );
  return Object.fromEntries(named.map(([name], i) => [name, sizes[i]!]));
}

async function batches(driver: LibraryDriver, runs: number): Promise<void> {
  for (let i = 0; i < runs; i += BATCH) {
    await Promise.all(
      Array.from({ length: Math.min(BATCH, runs - i) }, async () => {
        const status = await driver.settle(await driver.submit(BODY));
        if (status !== 'succeeded') throw new Error(`a run ended ${status}`);
      }),
    );
  }
}

const mib = (bytes: number): number => +(bytes / 2 ** 20).toFixed(1);

/** Asks the worker to collect garbage and report its resident set and V8 heap in use. */
async function workerMemory(worker: ChildProcess): Promise<{ rss: number; heapUsed: number }> {
  const reply = once(worker, 'message') as Promise<[{ rss: number; heapUsed: number }]>;
  worker.send('measure');
  return (await reply)[0];
}

export async function runMemory(log: (line: string) => void = console.log): Promise<MemoryResult> {
  const stack = await startBenchStack({}, { pools: [] });
  const worker = spawn(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', 'bench/support/memory-worker.ts'],
    { cwd: ROOT, env: { ...process.env, ...stack.env }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] },
  );
  const driver = libraryDriver(stack.api);
  const redis = new Redis(stack.env.REDIS_URL!);
  try {
    await once(worker, 'message'); // ready
    await batches(driver, 100); // scripts loaded, code compiled
    await new Promise((r) => setTimeout(r, 500));
    const redisUsedBefore = await usedMemory(redis);
    await batches(driver, REDIS_RUNS);
    await new Promise((r) => setTimeout(r, 500));
    const redisUsedAfter = await usedMemory(redis);
    const redisBytesPerRun = Math.round((redisUsedAfter - redisUsedBefore) / REDIS_RUNS);
    log(`  Redis: ${redisBytesPerRun} bytes per completed run over ${REDIS_RUNS} runs`);
    const sampleRun = await driver.submit(BODY);
    await driver.settle(sampleRun);
    const redisBreakdown = await breakdown(redis, stack.env.TETRALOOP_PREFIX!, sampleRun);

    await batches(driver, WARMUP_RUNS - 101 - REDIS_RUNS);
    const samples: MemorySample[] = [];
    const sample = async (runs: number): Promise<void> => {
      const { rss, heapUsed } = await workerMemory(worker);
      samples.push({ runs, rssMiB: mib(rss), heapUsedMiB: mib(heapUsed) });
      log(`  worker after +${runs} runs: RSS ${mib(rss)} MiB, heap used ${mib(heapUsed)} MiB`);
    };
    const started = performance.now();
    await sample(0);
    for (let done = 0; done < RSS_RUNS; done += SAMPLE_EVERY) {
      await batches(driver, SAMPLE_EVERY);
      await sample(done + SAMPLE_EVERY);
    }
    const first = samples[0]!;
    const last = samples.at(-1)!;
    const growth = (a: number, b: number): number => +((100 * (b - a)) / a).toFixed(1);
    const rssGrowthPercent = growth(first.rssMiB, last.rssMiB);
    const heapGrowthPercent = growth(first.heapUsedMiB, last.heapUsedMiB);
    log(
      `  worker RSS ${first.rssMiB} → ${last.rssMiB} MiB (${rssGrowthPercent} %) over ${RSS_RUNS} runs in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    return {
      redisRuns: REDIS_RUNS,
      redisUsedBefore,
      redisUsedAfter,
      redisBytesPerRun,
      redisBreakdown,
      rssRuns: RSS_RUNS,
      samples,
      rssGrowthPercent,
      heapGrowthPercent,
      settings: {
        graph: '1 json node',
        batch: BATCH,
        warmupRuns: WARMUP_RUNS,
        retention: 'defaults (TETRALOOP_RUN_RETENTION_SECONDS 7 days, completed jobs 1 h / 10,000)',
        worker:
          'plan and tool pools in one process (bench/support/memory-worker.ts), measured after a forced GC',
        submitted: 'through the library (RunService), as the API handler does',
      },
    };
  } finally {
    redis.disconnect();
    if (worker.exitCode === null) {
      const exited = once(worker, 'exit');
      if (worker.connected) worker.send('stop');
      else worker.kill('SIGTERM');
      await exited;
    }
    await stack.close();
  }
}

export function memoryTable(r: MemoryResult): string {
  const first = r.samples[0]!;
  const last = r.samples.at(-1)!;
  return [
    '| measure | runs | before | after | result | target |',
    '|---|---:|---:|---:|---:|---|',
    `| Redis used_memory per completed run (retained) | ${r.redisRuns} | ${r.redisUsedBefore} B | ${r.redisUsedAfter} B | ${r.redisBytesPerRun} B/run | stated |`,
    `| worker RSS after GC | ${r.rssRuns} | ${first.rssMiB} MiB | ${last.rssMiB} MiB | ${r.rssGrowthPercent} % | < 10 %: **${r.rssGrowthPercent < 10 ? 'yes' : 'no'}** |`,
    `| worker V8 heap used after GC | ${r.rssRuns} | ${first.heapUsedMiB} MiB | ${last.heapUsedMiB} MiB | ${r.heapGrowthPercent} % | — |`,
    '',
    `One settled run's keys (MEMORY USAGE, bytes): ${Object.entries(r.redisBreakdown)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        '; ',
      )}. The rest of the per-run figure is BullMQ's bookkeeping (completed sets, event streams) and allocator overhead; everything of a run expires with its retention.`,
    '',
    `Worker samples (runs after the ${WARMUP_RUNS}-run warm-up → RSS / heap used MiB): ${r.samples.map((s) => `${s.runs} → ${s.rssMiB} / ${s.heapUsedMiB}`).join(', ')}.`,
  ].join('\n');
}
