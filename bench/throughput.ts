/**
 * Throughput: many runs of a 10-node graph of fast `json` nodes (one source → 8 parallel → one
 * join) submitted at once, executed by 1 and then 2 `tetraloop worker --pool tool` child processes
 * (the plan pool and the API in this process), beside raw BullMQ no-op jobs in 1 and 2 child
 * processes at the same concurrency on the same Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { RunDocument } from '@tetraloop/core';
import { startBenchStack, type BenchStack } from './support/stack.js';

const RUNS = 500;
const NODES_PER_RUN = 10;
const CONCURRENCY = 32;
const PROCESS_COUNTS = [1, 2];
const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface ThroughputRow {
  processes: number;
  tetraloopRuns: number;
  tetraloopNodes: number;
  tetraloopSeconds: number;
  tetraloopNodesPerSecond: number;
  tetraloopRunsPerSecond: number;
  bullmqJobs: number;
  bullmqSeconds: number;
  bullmqJobsPerSecond: number;
}

export interface ThroughputResult {
  rows: ThroughputRow[];
  settings: Record<string, unknown>;
}

function graph(): { nodes: Record<string, unknown>[]; edges: [string, string][] } {
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

async function stopAll(children: readonly ChildProcess[]): Promise<void> {
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

async function submit(url: string, body: unknown): Promise<string> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { runId: string }).runId;
}

async function settle(url: string, runId: string): Promise<RunDocument> {
  for (;;) {
    const res = await fetch(`${url}/v1/runs/${runId}/wait?timeoutMs=60000`);
    const doc = (await res.json()) as RunDocument;
    if (res.status === 200) return doc;
  }
}

/** Submits `runs` runs at once and waits for all of them; returns the seconds taken. */
async function tetraloopBatch(stack: BenchStack, runs: number): Promise<number> {
  const body = { graph: graph() };
  const started = performance.now();
  const ids = await Promise.all(Array.from({ length: runs }, () => submit(stack.url, body)));
  const docs = await Promise.all(ids.map((id) => settle(stack.url, id)));
  const seconds = (performance.now() - started) / 1000;
  const failed = docs.filter((d) => d.status !== 'succeeded');
  if (failed.length > 0) throw new Error(`${failed.length} runs did not succeed, e.g. ${failed[0]!.status}`);
  return seconds;
}

async function waitForClients(redisUrl: string, pids: readonly number[]): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
      const list = (await redis.client('LIST')) as string;
      if (pids.every((pid) => list.includes(`tetraloop-worker-${pid}`))) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('tool workers did not connect within 60 s');
  } finally {
    redis.disconnect();
  }
}

async function tetraloopWith(stack: BenchStack, processes: number): Promise<number> {
  const children = Array.from({ length: processes }, () =>
    spawn(process.execPath, ['apps/cli/bin/tetraloop.mjs', 'worker', '--pool', 'tool'], {
      cwd: ROOT,
      env: { ...process.env, ...stack.env, TETRALOOP_TOOL_CONCURRENCY: String(CONCURRENCY) },
      stdio: ['ignore', 'ignore', 'inherit'],
    }),
  );
  try {
    await waitForClients(
      stack.env.REDIS_URL!,
      children.map((c) => c.pid!),
    );
    await new Promise((r) => setTimeout(r, 500));
    await tetraloopBatch(stack, 20); // warm-up: scripts loaded, JIT warm in every process
    return await tetraloopBatch(stack, RUNS);
  } finally {
    await stopAll(children);
  }
}

async function bullmqWith(redisUrl: string, processes: number, jobs: number): Promise<number> {
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
    await run(200, 'warm');
    await queue.clean(0, 100_000, 'completed');
    return await run(jobs, 'bench');
  } finally {
    await stopAll(children);
    await queue.close();
    connection.disconnect();
  }
}

export async function runThroughput(log: (line: string) => void = console.log): Promise<ThroughputResult> {
  const stack = await startBenchStack({}, { pools: ['plan'] });
  const rows: ThroughputRow[] = [];
  const nodes = RUNS * NODES_PER_RUN;
  try {
    for (const processes of PROCESS_COUNTS) {
      const tetraloopSeconds = await tetraloopWith(stack, processes);
      const bullmqSeconds = await bullmqWith(stack.env.REDIS_URL!, processes, nodes);
      const row: ThroughputRow = {
        processes,
        tetraloopRuns: RUNS,
        tetraloopNodes: nodes,
        tetraloopSeconds: Number(tetraloopSeconds.toFixed(2)),
        tetraloopNodesPerSecond: Math.round(nodes / tetraloopSeconds),
        tetraloopRunsPerSecond: Math.round(RUNS / tetraloopSeconds),
        bullmqJobs: nodes,
        bullmqSeconds: Number(bullmqSeconds.toFixed(2)),
        bullmqJobsPerSecond: Math.round(nodes / bullmqSeconds),
      };
      rows.push(row);
      log(
        `  ${processes} process(es): Tetraloop ${row.tetraloopNodesPerSecond} nodes/s (${row.tetraloopSeconds} s)  raw BullMQ ${row.bullmqJobsPerSecond} jobs/s (${row.bullmqSeconds} s)`,
      );
    }
  } finally {
    await stack.close();
  }
  return {
    rows,
    settings: {
      runs: RUNS,
      nodesPerRun: NODES_PER_RUN,
      graph: 'src → 8 parallel → join, all json tool nodes',
      concurrencyPerProcess: CONCURRENCY,
      planPool: 'in the bench process, with the API',
    },
  };
}

export function throughputTable(result: ThroughputResult): string {
  const lines = [
    '| tool-worker processes | runs | nodes | Tetraloop s | Tetraloop nodes/s | Tetraloop runs/s | raw BullMQ jobs | raw BullMQ s | raw BullMQ jobs/s | Tetraloop ÷ BullMQ |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of result.rows) {
    lines.push(
      `| ${r.processes} | ${r.tetraloopRuns} | ${r.tetraloopNodes} | ${r.tetraloopSeconds} | ${r.tetraloopNodesPerSecond} | ${r.tetraloopRunsPerSecond} | ${r.bullmqJobs} | ${r.bullmqSeconds} | ${r.bullmqJobsPerSecond} | ${(r.tetraloopNodesPerSecond / r.bullmqJobsPerSecond).toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}
