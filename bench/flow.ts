/**
 * Flow control: how close a saturated rate limit runs to its configured rate, and what flow control
 * adds per node when its limit never binds.
 *
 * - Utilisation: 160 `http` nodes (4 runs × 40 parallel nodes, each call 5 ms) against a host limited
 *   to 40 calls per 10 s. The sliding-window limit lets a burst of 40 go at once, then each next call
 *   an interval after an earlier one ended, so the calls after the first burst measure the rate
 *   achieved: utilisation = (calls − 40) / (40 per interval × time from the first call to the last).
 *   Violations: windows of one interval, anchored at each call's arrival at the tool server,
 *   holding more than 40 calls.
 * - Overhead: the 200-node chain of `per-hop` on two stacks at once, one without limits and one with
 *   a limit every call falls under but that never binds (concurrency 100,000 per tool), alternated
 *   run by run; the difference of the per-hop medians is what flow control costs a node (one
 *   acquire and one release script).
 */
import { HookRegistry } from '@tetraloop/core/hooks';
import { startToolServer } from '../test/support/tool-server.js';
import { chain } from './support/dag.js';
import { median, percentile, startBenchStack, timedRun, type BenchStack } from './support/stack.js';

const RATE = 40;
const INTERVAL_MS = 10_000;
const RUNS = 4;
const NODES_PER_RUN = 40;
const HOPS = 200;
const REPEATS = 5;

export interface FlowResult {
  utilisation: {
    calls: number;
    limitPerInterval: number;
    intervalMs: number;
    achievedPerInterval: number;
    /** How much later than the rate allows each burst after the first went, on average. */
    lostPerIntervalMs: number;
    utilisation: number;
    violations: number;
    mostInOneInterval: number;
    spanMs: number;
  };
  overhead: {
    withoutLimitsP50Ms: number;
    withLimitP50Ms: number;
    overheadP50Ms: number;
    withoutLimitsP99Ms: number;
    withLimitP99Ms: number;
    hops: number;
  };
  settings: Record<string, number | string>;
}

async function utilisation(log: (line: string) => void): Promise<FlowResult['utilisation']> {
  const tools = await startToolServer();
  const host = new URL(tools.url).host;
  const stack = await startBenchStack({
    TETRALOOP_LIMITS: JSON.stringify([
      { name: 'saturated', key: 'host', match: host, rate: { requests: RATE, intervalMs: INTERVAL_MS } },
    ]),
  });
  try {
    const graph = (r: number) => ({
      nodes: Array.from({ length: NODES_PER_RUN }, (_, i) => ({
        id: `n${i}`,
        kind: 'tool',
        tool: 'http',
        args: { url: `${tools.url}/work?node=r${r}n${i}&ms=5` },
      })),
      edges: [],
    });
    log(`utilisation: ${RUNS * NODES_PER_RUN} calls at ${RATE} per ${INTERVAL_MS} ms`);
    const docs = await Promise.all(
      Array.from({ length: RUNS }, (_, r) => timedRun(stack.url, { graph: graph(r) })),
    );
    const failed = docs.filter((d) => d.doc.status !== 'succeeded');
    if (failed.length > 0) throw new Error(`${failed.length} flow runs did not succeed`);
    const starts = tools.hits.map((h) => h.start).sort((a, b) => a - b);
    let most = 0;
    let violations = 0;
    for (const t of starts) {
      const n = starts.filter((u) => u >= t && u < t + INTERVAL_MS).length;
      most = Math.max(most, n);
      if (n > RATE) violations++;
    }
    const spanMs = starts.at(-1)! - starts[0]!;
    const achieved = ((starts.length - RATE) / spanMs) * INTERVAL_MS;
    return {
      calls: starts.length,
      limitPerInterval: RATE,
      intervalMs: INTERVAL_MS,
      achievedPerInterval: Number(achieved.toFixed(2)),
      lostPerIntervalMs: Math.round(spanMs / ((starts.length - RATE) / RATE) - INTERVAL_MS),
      utilisation: Number((achieved / RATE).toFixed(4)),
      violations,
      mostInOneInterval: most,
      spanMs: Math.round(spanMs),
    };
  } finally {
    await stack.close();
    await tools.close();
  }
}

function jsonChain(): { nodes: Record<string, unknown>[]; edges: [string, string][] } {
  const dag = chain(HOPS, 0, 'h');
  return {
    nodes: dag.nodes.map((n, i) => ({ id: n.id, kind: 'tool', tool: 'json', args: { value: i } })),
    edges: dag.edges.map(([a, b]) => [a, b]),
  };
}

async function overhead(log: (line: string) => void): Promise<FlowResult['overhead']> {
  const startsOf = new Map<BenchStack, Map<string, number>>();
  const stackWith = async (env: Record<string, string>): Promise<BenchStack> => {
    const starts = new Map<string, number>();
    const registry = new HookRegistry();
    registry.on('before_tool_call', (ctx) => {
      starts.set(ctx.nodeId, performance.now());
    });
    const stack = await startBenchStack(env, { hooks: { registry } });
    startsOf.set(stack, starts);
    return stack;
  };
  const plain = await stackWith({});
  const limited = await stackWith({
    TETRALOOP_LIMITS: JSON.stringify([{ name: 'unbound', key: 'tool', concurrency: 100_000 }]),
  });
  const graph = jsonChain();
  const deltas = new Map<BenchStack, number[]>([
    [plain, []],
    [limited, []],
  ]);
  try {
    for (const stack of [plain, limited]) await timedRun(stack.url, { graph }); // warm-up
    for (let r = 0; r < REPEATS; r++) {
      for (const stack of [plain, limited]) {
        log(`overhead: chain ${r + 1}/${REPEATS} ${stack === plain ? 'without limits' : 'with a limit'}`);
        const starts = startsOf.get(stack)!;
        starts.clear();
        const { doc } = await timedRun(stack.url, { graph });
        if (doc.status !== 'succeeded') throw new Error(`chain ended ${doc.status}`);
        const times = graph.nodes.map((n) => starts.get(n.id as string)!);
        deltas.get(stack)!.push(...times.slice(1).map((t, i) => t - times[i]!));
      }
    }
  } finally {
    await plain.close();
    await limited.close();
  }
  const p50 = (s: BenchStack) => median(deltas.get(s)!);
  const p99 = (s: BenchStack) => percentile(deltas.get(s)!, 99);
  return {
    withoutLimitsP50Ms: Number(p50(plain).toFixed(3)),
    withLimitP50Ms: Number(p50(limited).toFixed(3)),
    overheadP50Ms: Number((p50(limited) - p50(plain)).toFixed(3)),
    withoutLimitsP99Ms: Number(p99(plain).toFixed(3)),
    withLimitP99Ms: Number(p99(limited).toFixed(3)),
    hops: deltas.get(plain)!.length,
  };
}

export async function runFlow(log: (line: string) => void = console.log): Promise<FlowResult> {
  return {
    utilisation: await utilisation(log),
    overhead: await overhead(log),
    settings: {
      limitPerInterval: RATE,
      intervalMs: INTERVAL_MS,
      calls: RUNS * NODES_PER_RUN,
      callMs: 5,
      chainHops: HOPS,
      repeats: REPEATS,
      limitForOverhead: 'concurrency 100,000 per tool (never binds)',
    },
  };
}

export function flowTable(result: FlowResult): string {
  const u = result.utilisation;
  const o = result.overhead;
  return [
    '| saturated host limit | value |',
    '|---|---|',
    `| calls | ${u.calls} |`,
    `| configured rate | ${u.limitPerInterval} per ${u.intervalMs / 1000} s |`,
    `| achieved after the first burst | ${u.achievedPerInterval} per ${u.intervalMs / 1000} s |`,
    `| utilisation | ${(u.utilisation * 100).toFixed(1)} % |`,
    `| lost per interval (grant, wake and call time) | ${u.lostPerIntervalMs} ms |`,
    `| most calls in one interval | ${u.mostInOneInterval} |`,
    `| violations (intervals over the limit) | ${u.violations} |`,
    '',
    '| per-hop, 200-node chain | p50 ms | p99 ms |',
    '|---|---|---|',
    `| without limits | ${o.withoutLimitsP50Ms} | ${o.withoutLimitsP99Ms} |`,
    `| with a limit that never binds | ${o.withLimitP50Ms} | ${o.withLimitP99Ms} |`,
    `| flow control per node (difference of medians) | ${o.overheadP50Ms} | |`,
  ].join('\n');
}
