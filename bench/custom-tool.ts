/**
 * Custom tool overhead: the throughput benchmark's 10-node graph (one source → 8 parallel → one
 * join) of a no-op custom tool (`bench.noop`, served from a tool module by the tool worker
 * process) beside the same graph of the built-in `json` tool, in the same run, on the same
 * processes (one `tetraloop worker --pool plan`, one `tetraloop worker --pool tool --tools …`).
 * Batches alternate json / custom so drift on a shared machine hits both; each figure is the
 * median of the rounds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { commandCounts, cpuDuring } from './support/cpu.js';
import { libraryDriver, type LibraryDriver } from './support/library-driver.js';
import { median, startBenchStack } from './support/stack.js';
import { NODES_PER_RUN, graph, stopAll } from './throughput.js';

const RUNS = 300;
const ROUNDS = 5;
const CONCURRENCY = 32;
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MODULE = fileURLToPath(new URL('./support/noop-tools.mjs', import.meta.url));

export interface CustomToolSide {
  /** Median over the rounds. */
  nodesPerSecond: number;
  /** Wall ms per node (1 / throughput). */
  msPerNode: number;
  /** CPU ms per node of the tool worker process. */
  workerCpuMs: number;
  /** Redis commands per node. */
  redisCommands: number;
}

export interface CustomToolResult {
  json: CustomToolSide;
  custom: CustomToolSide;
  /**
   * custom ÷ json per-node wall time, minus 1 (0.05: 5 % more per node): the median of each
   * round's ratio, so a slow spell of the machine compares like with like.
   */
  overhead: number;
  /** The same for the tool worker's CPU per node. */
  cpuOverhead: number;
  settings: Record<string, unknown>;
}

/** The graph with every node calling `tool` (json or the custom no-op, which take `value` alike). */
const graphOf = (tool: string) => {
  const g = graph();
  return { ...g, nodes: g.nodes.map((n) => ({ ...n, tool })) };
};

async function batch(driver: LibraryDriver, body: unknown, runs: number): Promise<number> {
  const started = performance.now();
  const ids = await Promise.all(Array.from({ length: runs }, () => driver.submit(body)));
  const statuses = await Promise.all(ids.map((id) => driver.settle(id)));
  const bad = statuses.filter((s) => s !== 'succeeded');
  if (bad.length > 0) throw new Error(`${bad.length} runs did not succeed (${bad[0]})`);
  return (performance.now() - started) / 1000;
}

export async function runCustomTool(log: (line: string) => void = console.log): Promise<CustomToolResult> {
  const stack = await startBenchStack({}, { pools: [] });
  const driver = libraryDriver(stack.api);
  const env = { ...process.env, ...stack.env, TETRALOOP_TOOL_CONCURRENCY: String(CONCURRENCY) };
  const spawnWorker = (...args: string[]): ChildProcess =>
    spawn(process.execPath, ['apps/cli/bin/tetraloop.mjs', 'worker', ...args], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  const planner = spawnWorker('--pool', 'plan');
  const tool = spawnWorker('--pool', 'tool', '--tools', MODULE);
  const redis = new Redis(stack.env.REDIS_URL!);
  const samples = { json: [] as CustomToolSide[], custom: [] as CustomToolSide[] };
  try {
    // The tool is known once the worker published it and the API read the catalog.
    for (const deadline = Date.now() + 60_000; ;) {
      const listed = (await (await fetch(`${stack.url}/v1/tools`)).json()) as { tools: { name: string }[] };
      if (listed.tools.some((t) => t.name === 'bench.noop')) break;
      if (Date.now() > deadline) throw new Error('the tool worker did not publish bench.noop in 60 s');
      await new Promise((r) => setTimeout(r, 200));
    }
    const bodies = { json: { graph: graphOf('json') }, custom: { graph: graphOf('bench.noop') } };
    // Warm-up: scripts loaded and code compiled in every process, for both.
    await batch(driver, bodies.json, 30);
    await batch(driver, bodies.custom, 30);
    const nodes = RUNS * NODES_PER_RUN;
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of ['json', 'custom'] as const) {
        const info = (): Promise<string> => redis.info('commandstats');
        const before = await commandCounts(info);
        const { result: seconds, cpuMs } = await cpuDuring({ workers: [tool.pid!] }, () =>
          batch(driver, bodies[side], RUNS),
        );
        const after = await commandCounts(info);
        const sample = {
          nodesPerSecond: Math.round(nodes / seconds),
          msPerNode: Number(((seconds * 1000) / nodes).toFixed(4)),
          workerCpuMs: Number(((cpuMs.workers ?? 0) / nodes).toFixed(4)),
          redisCommands: Number(((after.commands - before.commands) / nodes).toFixed(2)),
        };
        samples[side].push(sample);
        log(
          `round ${round + 1} ${side}: ${sample.nodesPerSecond} nodes/s, worker ${sample.workerCpuMs} ms CPU/node`,
        );
      }
    }
  } finally {
    redis.disconnect();
    await stopAll([planner, tool]);
    await stack.close();
  }
  const mid = (list: CustomToolSide[]): CustomToolSide => ({
    nodesPerSecond: median(list.map((s) => s.nodesPerSecond)),
    msPerNode: median(list.map((s) => s.msPerNode)),
    workerCpuMs: median(list.map((s) => s.workerCpuMs)),
    redisCommands: median(list.map((s) => s.redisCommands)),
  });
  const json = mid(samples.json);
  const custom = mid(samples.custom);
  const ratio = (field: 'msPerNode' | 'workerCpuMs'): number =>
    Number((median(samples.custom.map((c, i) => c[field] / samples.json[i]![field])) - 1).toFixed(3));
  return {
    json,
    custom,
    overhead: ratio('msPerNode'),
    cpuOverhead: ratio('workerCpuMs'),
    settings: { runs: RUNS, nodesPerRun: NODES_PER_RUN, rounds: ROUNDS, toolConcurrency: CONCURRENCY },
  };
}

export function customToolTable(result: CustomToolResult): string {
  const row = (name: string, s: CustomToolSide): string =>
    `| ${name} | ${s.nodesPerSecond} | ${s.msPerNode} | ${s.workerCpuMs} | ${s.redisCommands} |`;
  return [
    '| nodes of | nodes/s | wall ms per node | tool worker CPU ms per node | Redis commands per node |',
    '|---|---|---|---|---|',
    row('built-in `json`', result.json),
    row('custom `bench.noop`', result.custom),
    '',
    `Per-node overhead of the custom tool (median of each round's custom ÷ json): wall **${(result.overhead * 100).toFixed(1)} %**, tool worker CPU **${(result.cpuOverhead * 100).toFixed(1)} %** (target: within 10 %).`,
  ].join('\n');
}
