/**
 * Memory: Redis `used_memory` per completed run (default retention, so settled runs are kept),
 * and the RSS of this process, which runs the API and the plan and tool pools, before and after
 * many small runs submitted in batches of 100.
 */
import { Redis } from 'ioredis';
import type { RunDocument } from '@tetraloop/core';
import { startBenchStack, type BenchStack } from './support/stack.js';

const REDIS_RUNS = 300;
const RSS_RUNS = 2000;
const BATCH = 100;
const BODY = { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: { n: 1 } } }] } };

export interface MemoryResult {
  redisRuns: number;
  redisUsedBefore: number;
  redisUsedAfter: number;
  redisBytesPerRun: number;
  rssRuns: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
  rssGrowthPercent: number;
  gcForced: boolean;
  settings: Record<string, unknown>;
}

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

async function runOne(url: string): Promise<void> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(BODY),
  });
  if (res.status !== 202) throw new Error(`submit answered ${res.status}`);
  const { runId } = (await res.json()) as { runId: string };
  for (;;) {
    const wait = await fetch(`${url}/v1/runs/${runId}/wait?timeoutMs=60000`);
    const doc = (await wait.json()) as RunDocument;
    if (wait.status === 200) {
      if (doc.status !== 'succeeded') throw new Error(`run ${runId}: ${doc.status}`);
      return;
    }
  }
}

async function batches(stack: BenchStack, runs: number): Promise<void> {
  for (let i = 0; i < runs; i += BATCH) {
    await Promise.all(Array.from({ length: Math.min(BATCH, runs - i) }, () => runOne(stack.url)));
  }
}

const gc = (globalThis as { gc?: () => void }).gc;
const settleHeap = async (): Promise<void> => {
  gc?.();
  await new Promise((r) => setTimeout(r, 200));
  gc?.();
};
const mib = (bytes: number): number => +(bytes / 2 ** 20).toFixed(1);

export async function runMemory(log: (line: string) => void = console.log): Promise<MemoryResult> {
  const stack = await startBenchStack({ TETRALOOP_TOOL_CONCURRENCY: '32' });
  const redis = new Redis(stack.env.REDIS_URL!);
  try {
    await batches(stack, 100); // warm-up: scripts loaded, JIT warm
    await new Promise((r) => setTimeout(r, 500));
    const redisUsedBefore = await usedMemory(redis);
    await batches(stack, REDIS_RUNS);
    await new Promise((r) => setTimeout(r, 500));
    const redisUsedAfter = await usedMemory(redis);
    const redisBytesPerRun = Math.round((redisUsedAfter - redisUsedBefore) / REDIS_RUNS);
    log(`  Redis: ${redisBytesPerRun} bytes per completed run over ${REDIS_RUNS} runs`);

    await settleHeap();
    const rssBefore = process.memoryUsage().rss;
    const started = performance.now();
    await batches(stack, RSS_RUNS);
    await settleHeap();
    const rssAfter = process.memoryUsage().rss;
    const rssGrowthPercent = +((100 * (rssAfter - rssBefore)) / rssBefore).toFixed(1);
    log(
      `  RSS: ${mib(rssBefore)} → ${mib(rssAfter)} MiB (${rssGrowthPercent} %) over ${RSS_RUNS} runs in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    return {
      redisRuns: REDIS_RUNS,
      redisUsedBefore,
      redisUsedAfter,
      redisBytesPerRun,
      rssRuns: RSS_RUNS,
      rssBeforeMiB: mib(rssBefore),
      rssAfterMiB: mib(rssAfter),
      rssGrowthPercent,
      gcForced: gc !== undefined,
      settings: {
        graph: '1 json node',
        batch: BATCH,
        warmupRuns: 100,
        retention: 'defaults (TETRALOOP_RUN_RETENTION_SECONDS 7 days, completed jobs 1 h / 10,000)',
        rssProcess: 'the bench process: API, plan pool and tool pool in-process',
      },
    };
  } finally {
    redis.disconnect();
    await stack.close();
  }
}

export function memoryTable(r: MemoryResult): string {
  return [
    '| measure | runs | before | after | result | target |',
    '|---|---:|---:|---:|---:|---|',
    `| Redis used_memory per completed run | ${r.redisRuns} | ${r.redisUsedBefore} B | ${r.redisUsedAfter} B | ${r.redisBytesPerRun} B/run | — |`,
    `| bench-process RSS (API + plan + tool pools) | ${r.rssRuns} | ${r.rssBeforeMiB} MiB | ${r.rssAfterMiB} MiB | ${r.rssGrowthPercent} % | < 10 %: **${r.rssGrowthPercent < 10 ? 'yes' : 'no'}** |`,
    '',
    `global.gc forced: ${r.gcForced ? 'yes' : 'no (not exposed; run with NODE_OPTIONS=--expose-gc to force it)'}. ${r.rssRuns} runs rather than 5,000 to keep the benchmark short.`,
  ].join('\n');
}
