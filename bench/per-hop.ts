/**
 * Per-hop latency: how long it takes from one node starting to the next one starting in a chain
 * of 200 nodes that do nothing. Tetraloop runs a chain of `json` tool nodes (deltas between the
 * tool calls' start times, taken with performance.now() by a `before_tool_call` hook); raw BullMQ
 * runs a chain where each job's processor adds the next job (deltas between processor start
 * times); LangGraph.js runs a 200-node chain of no-op nodes in-process.
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { HookRegistry } from '@tetraloop/core/hooks';
import { chain, langGraphOf } from './support/dag.js';
import { median, percentile, startBenchStack, timedRun, type BenchStack } from './support/stack.js';

/** The tool pool's default concurrency, used for the BullMQ worker too. */
const CONCURRENCY = 32;

export interface HopStats {
  system: string;
  hops: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** How the deltas were taken. */
  source: string;
}

const stats = (system: string, deltas: number[], source: string): HopStats => ({
  system,
  hops: deltas.length,
  p50Ms: Number(median(deltas).toFixed(3)),
  p99Ms: Number(percentile(deltas, 99).toFixed(3)),
  meanMs: Number((deltas.reduce((a, b) => a + b, 0) / deltas.length).toFixed(3)),
  source,
});

const deltasOf = (starts: readonly number[]): number[] => starts.slice(1).map((t, i) => t - starts[i]!);

function jsonChain(hops: number): { nodes: Record<string, unknown>[]; edges: [string, string][] } {
  const dag = chain(hops, 0, 'h');
  return {
    nodes: dag.nodes.map((n, i) => ({ id: n.id, kind: 'tool', tool: 'json', args: { value: i } })),
    edges: dag.edges.map(([a, b]) => [a, b]),
  };
}

async function tetraloopHops(
  stack: BenchStack,
  toolStarts: Map<string, number>,
  { hops, repeats }: PerHopOptions,
): Promise<{ deltas: number[]; totalMs: number[] }> {
  const graph = jsonChain(hops);
  await timedRun(stack.url, { graph }); // warm-up
  const deltas: number[] = [];
  const totalMs: number[] = [];
  for (let r = 0; r < repeats; r++) {
    toolStarts.clear();
    const { doc, wallMs } = await timedRun(stack.url, { graph });
    if (doc.status !== 'succeeded') throw new Error(`per-hop chain ended ${doc.status}`);
    const starts = graph.nodes.map((n) => {
      const at = toolStarts.get(n.id as string);
      if (at === undefined) throw new Error(`node ${n.id as string} never called its tool`);
      return at;
    });
    deltas.push(...deltasOf(starts));
    totalMs.push(wallMs);
  }
  return { deltas, totalMs };
}

async function bullmqHops(redisUrl: string, { hops, repeats }: PerHopOptions): Promise<number[]> {
  const prefix = `bench-hop-${process.pid}`;
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const workerConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue('hop', { connection, prefix });
  let starts: number[] = [];
  let done: (() => void) | undefined;
  const worker = new Worker(
    'hop',
    async (job) => {
      const { i, round } = job.data as { i: number; round: number };
      starts.push(performance.now());
      if (i + 1 < hops) await queue.add('hop', { i: i + 1, round }, { jobId: `r${round}.${i + 1}` });
      else done?.();
    },
    { connection: workerConnection, prefix, concurrency: CONCURRENCY },
  );
  await worker.waitUntilReady();
  const deltas: number[] = [];
  try {
    for (let round = -1; round < repeats; round++) {
      starts = [];
      const finished = new Promise<void>((resolve) => (done = resolve));
      await queue.add('hop', { i: 0, round }, { jobId: `r${round}.0` });
      await finished;
      // round -1 is the warm-up.
      if (round >= 0) deltas.push(...deltasOf(starts));
    }
  } finally {
    await worker.close();
    await queue.close();
    connection.disconnect();
    workerConnection.disconnect();
  }
  return deltas;
}

async function langGraphHops({ hops, repeats }: PerHopOptions): Promise<number[]> {
  let starts: number[] = [];
  const invoke = langGraphOf(chain(hops, 0, 'h'), () => {
    starts.push(performance.now());
    return Promise.resolve();
  });
  await invoke(); // warm-up
  const deltas: number[] = [];
  for (let r = 0; r < repeats; r++) {
    starts = [];
    await invoke();
    deltas.push(...deltasOf(starts));
  }
  return deltas;
}

export interface PerHopResult {
  rows: HopStats[];
  tetraloopTotalMsPerHop: number;
  settings: PerHopOptions & { concurrency: number };
}

export interface PerHopOptions {
  /** Nodes in the chain. */
  hops: number;
  /** Measured runs of the chain, after one warm-up run. */
  repeats: number;
  /** Also time LangGraph.js in-process (the Redis-free reference). */
  langGraph: boolean;
}

const TETRALOOP = 'Tetraloop (json tool nodes)';
const RAW_BULLMQ = 'raw BullMQ (job adds next job)';

const p50Of = (result: PerHopResult, system: string): number =>
  result.rows.find((r) => r.system === system)!.p50Ms;

/** Tetraloop's p50 per hop ÷ raw BullMQ's, in one result. */
export const p50VsRaw = (result: PerHopResult): number =>
  p50Of(result, TETRALOOP) / p50Of(result, RAW_BULLMQ);

export async function runPerHop(
  log: (line: string) => void = console.log,
  options: PerHopOptions = { hops: 200, repeats: 3, langGraph: true },
): Promise<PerHopResult> {
  const { hops } = options;
  // The tool pool runs in this process, so a hook can take each tool call's start time.
  const toolStarts = new Map<string, number>();
  const registry = new HookRegistry();
  registry.on('before_tool_call', (ctx) => {
    toolStarts.set(ctx.nodeId, performance.now());
  });
  const stack = await startBenchStack(
    { TETRALOOP_TOOL_CONCURRENCY: String(CONCURRENCY) },
    { hooks: { registry } },
  );
  const rows: HopStats[] = [];
  let tetraloopTotalMsPerHop: number;
  try {
    const tetraloop = await tetraloopHops(stack, toolStarts, options);
    tetraloopTotalMsPerHop = Number((median(tetraloop.totalMs) / hops).toFixed(3));
    rows.push(stats(TETRALOOP, tetraloop.deltas, 'tool call start, performance.now()'));
    rows.push(
      stats(
        RAW_BULLMQ,
        await bullmqHops(stack.env.REDIS_URL!, options),
        'processor start, performance.now()',
      ),
    );
    if (options.langGraph)
      rows.push(
        stats(
          'LangGraph.js (in-process no-op nodes)',
          await langGraphHops(options),
          'node start, performance.now()',
        ),
      );
  } finally {
    await stack.close();
  }
  for (const r of rows)
    log(`  ${r.system.padEnd(40)} p50 ${r.p50Ms} ms  p99 ${r.p99Ms} ms  mean ${r.meanMs} ms`);
  log(`  Tetraloop wall time ÷ ${hops}: ${tetraloopTotalMsPerHop} ms`);
  return {
    rows,
    tetraloopTotalMsPerHop,
    settings: { ...options, concurrency: CONCURRENCY },
  };
}

export function perHopTable(result: PerHopResult): string {
  const lines = [
    '| system | deltas | p50 ms/hop | p99 ms/hop | mean ms/hop | p50 ÷ raw BullMQ p50 | timestamps |',
    '|---|---:|---:|---:|---:|---:|---|',
  ];
  for (const r of result.rows) {
    lines.push(
      `| ${r.system} | ${r.hops} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${r.meanMs.toFixed(2)} | ${(r.p50Ms / p50Of(result, RAW_BULLMQ)).toFixed(2)} | ${r.source} |`,
    );
  }
  lines.push(
    '',
    `Tetraloop wall time of the whole run (submit → settled) ÷ ${result.settings.hops}: ${result.tetraloopTotalMsPerHop.toFixed(2)} ms per hop.`,
  );
  return lines.join('\n');
}
