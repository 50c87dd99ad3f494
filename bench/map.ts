/**
 * Map nodes: one `map` node whose items each call the loopback tool server's `/work?ms=D` through
 * the `http` tool (the sleeping node of the other execution benchmarks), beside LangGraph.js's
 * `Send` fan-out making the same calls in-process at the same concurrency (`maxConcurrency`), in
 * the same run, on the same tool server.
 *
 * - waves: 1,000 items × 20 ms at concurrency 100. The floor is 10 waves × 20 ms = 200 ms; the
 *   figure is wall ÷ that floor. Each side's figure is the median of its runs.
 * - wide: 10,000 items × 1 ms at concurrency 100, once each. Besides the wall time: Redis commands
 *   per item (INFO commandstats, before → after, the benchmark's own INFO, MEMORY and SCAN calls
 *   left out) and Redis bytes per item, read two ways — the highest `used_memory` above the
 *   baseline while the run ran (sampled every 100 ms from INFO memory), and what the run leaves
 *   once settled (`used_memory` after − before, and MEMORY USAGE summed over every key naming
 *   the run: its own keys and any job BullMQ kept).
 *
 * The API and the plan and tool pools run in this process (tool concurrency 128, above the
 * map's 100), as LangGraph.js does; a warm-up run of each side goes first. A plain loop making the
 * same calls at the same concurrency, no executor, shows what the machine allowed at the time.
 */
import { setMaxListeners } from 'node:events';
import { Annotation, END, START, Send, StateGraph } from '@langchain/langgraph';
import { Redis } from 'ioredis';
import { startToolServer } from '../test/support/tool-server.js';
import { commandCounts } from './support/cpu.js';
import type { RunDocument } from '@tetraloop/core/domain';
import { median, startBenchStack, timedRun } from './support/stack.js';

const TOOL_CONCURRENCY = 128;
const CONCURRENCY = 100;
const WAVES = { items: 1000, ms: 20, repeats: 3 } as const;
const WIDE = { items: 10_000, ms: 1 } as const;
/** INFO memory every this often while the wide run runs, for its peak. */
const MEMORY_SAMPLE_MS = 100;
/** The benchmark's own commands, left out of the counts. */
const OWN_COMMANDS = /^cmdstat_(info|memory|scan)\b/;

export interface MapWaves {
  items: number;
  itemMs: number;
  concurrency: number;
  /** ceil(items ÷ concurrency) × itemMs. */
  floorMs: number;
  tetraloopMs: number;
  tetraloopRunsMs: number[];
  langGraphMs: number;
  langGraphRunsMs: number[];
  /** The same calls from a plain loop, no executor (`plainCalls`). */
  plainMs: number;
  plainRunsMs: number[];
}

export interface MapWide {
  items: number;
  itemMs: number;
  concurrency: number;
  tetraloopMs: number;
  langGraphMs: number;
  plainMs: number;
  /** Redis commands per item, the run's whole life (submit → settled). */
  commandsPerItem: number;
  /** Of them, script calls (EVALSHA) per item. */
  scriptsPerItem: number;
  /** The highest used_memory above the baseline while the run ran, per item. */
  peakBytesPerItem: number;
  /** used_memory after the run settled − before it, per item. */
  retainedBytesPerItem: number;
  /** MEMORY USAGE summed over the keys naming the run once it settled, per item. */
  runKeysBytesPerItem: number;
  runKeys: number;
  /** Tool calls the run made per item: above 1 when items were retried (a loaded machine's timeouts). */
  toolCallsPerItem: number;
}

export interface MapResult {
  waves: MapWaves;
  wide: MapWide;
  settings: Record<string, unknown>;
}

const itemsOf = (count: number): number[] => Array.from({ length: count }, (_, i) => i);

/** A run of one map node over `input.items`, each item one `/work` call of `ms`. */
function mapRequest(tools: string, count: number, ms: number): Record<string, unknown> {
  return {
    input: { items: itemsOf(count) },
    // Room for retries: on a loaded machine an item may time out and run again.
    budget: { toolCalls: count * 5 + 10 },
    graph: {
      nodes: [
        {
          id: 'fan',
          kind: 'map',
          over: { $ref: 'input.items' },
          node: { kind: 'tool', tool: 'http', args: { url: `${tools}/work?node=m{{item}}&ms=${ms}` } },
          concurrency: CONCURRENCY,
          maxItems: Math.max(count, 1),
        },
      ],
    },
  };
}

async function tetraloopMap(url: string, tools: string, count: number, ms: number): Promise<number> {
  const { doc, wallMs } = await timedRun(url, mapRequest(tools, count, ms));
  if (doc.status !== 'succeeded')
    throw new Error(`the map run ended ${doc.status}: ${JSON.stringify(doc.error)}`);
  return wallMs;
}

/**
 * One `/work` call from this process. A connection the tool server closed while idle (keep-alive)
 * fails with ECONNRESET on a loaded machine; it is made again once, as Tetraloop's `http` tool
 * retries a network error.
 */
async function work(url: string): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(url);
      if (!res.ok) throw new Error(`${url} answered ${res.status}`);
      return await res.json();
    } catch (err) {
      if (attempt >= 2 || !(err instanceof TypeError)) throw err;
    }
  }
}

/**
 * The same calls from a plain loop in this process, `CONCURRENCY` at once: what the machine and
 * the tool server allow with no executor at all (on a loaded machine, far above the floor).
 */
async function plainCalls(tools: string, count: number, ms: number): Promise<number> {
  const started = performance.now();
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) await work(`${tools}/work?node=p${i}&ms=${ms}`);
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return performance.now() - started;
}

const FanState = Annotation.Root({
  items: Annotation<number[]>(),
  done: Annotation<unknown[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/**
 * LangGraph.js's map: a conditional edge from START sends each item to `work` (`Send`), which
 * makes the item's call; `maxConcurrency` holds the calls at once to the map's concurrency.
 */
function langGraphMap(tools: string, ms: number): (count: number) => Promise<number> {
  const graph = new StateGraph(FanState)
    .addNode('work', async (state: { item: number }) => ({
      done: [await work(`${tools}/work?node=g${state.item}&ms=${ms}`)],
    }))
    .addConditionalEdges(START, (state) => state.items.map((item) => new Send('work', { item })))
    .addEdge('work', END)
    .compile();
  return async (count) => {
    const started = performance.now();
    const out = await graph.invoke({ items: itemsOf(count) }, { maxConcurrency: CONCURRENCY });
    if (out.done.length !== count) throw new Error(`LangGraph ran ${out.done.length} of ${count} items`);
    return performance.now() - started;
  };
}

const usedMemory = async (redis: Redis): Promise<number> =>
  Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? NaN);

/** MEMORY USAGE summed over the keys whose name holds `runId`, and how many there are. */
async function runKeysBytes(redis: Redis, runId: string): Promise<{ bytes: number; keys: number }> {
  let bytes = 0;
  let keys = 0;
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `*${runId}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of found) {
      bytes += (await redis.memory('USAGE', key, 'SAMPLES', 0)) ?? 0;
      keys += 1;
    }
  } while (cursor !== '0');
  return { bytes, keys };
}

export async function runMap(log: (line: string) => void = console.log): Promise<MapResult> {
  // LangGraph.js adds one abort listener per running task to the run's signal.
  setMaxListeners(CONCURRENCY + 50);
  const tools = await startToolServer();
  const stack = await startBenchStack({ TETRALOOP_TOOL_CONCURRENCY: String(TOOL_CONCURRENCY) });
  const redis = new Redis(stack.env.REDIS_URL!);
  try {
    // Warm-up: scripts loaded, connections open, JIT warm, on both sides.
    await tetraloopMap(stack.url, tools.url, 200, 1);
    await langGraphMap(tools.url, 1)(200);

    const tetraloopRuns: number[] = [];
    const langGraphRuns: number[] = [];
    const plainRuns: number[] = [];
    const langGraphWaves = langGraphMap(tools.url, WAVES.ms);
    for (let i = 0; i < WAVES.repeats; i++) {
      tetraloopRuns.push(Math.round(await tetraloopMap(stack.url, tools.url, WAVES.items, WAVES.ms)));
      langGraphRuns.push(Math.round(await langGraphWaves(WAVES.items)));
      plainRuns.push(Math.round(await plainCalls(tools.url, WAVES.items, WAVES.ms)));
      log(
        `  waves run ${i + 1}: tetraloop ${tetraloopRuns.at(-1)} ms, langgraph ${langGraphRuns.at(-1)} ms, plain ${plainRuns.at(-1)} ms`,
      );
    }
    const waves: MapWaves = {
      items: WAVES.items,
      itemMs: WAVES.ms,
      concurrency: CONCURRENCY,
      floorMs: Math.ceil(WAVES.items / CONCURRENCY) * WAVES.ms,
      tetraloopMs: median(tetraloopRuns),
      tetraloopRunsMs: tetraloopRuns,
      langGraphMs: median(langGraphRuns),
      langGraphRunsMs: langGraphRuns,
      plainMs: median(plainRuns),
      plainRunsMs: plainRuns,
    };

    const info = async (): Promise<string> =>
      (await redis.info('commandstats'))
        .split('\n')
        .filter((line) => !OWN_COMMANDS.test(line.trim()))
        .join('\n');
    const baseline = await usedMemory(redis);
    const before = await commandCounts(info);
    let peak = baseline;
    const sampler = setInterval(() => {
      usedMemory(redis).then(
        (used) => (peak = Math.max(peak, used)),
        () => undefined,
      );
    }, MEMORY_SAMPLE_MS);
    let wide: { doc: RunDocument; wallMs: number };
    try {
      wide = await timedRun(stack.url, mapRequest(tools.url, WIDE.items, WIDE.ms));
    } finally {
      clearInterval(sampler);
    }
    if (wide.doc.status !== 'succeeded')
      throw new Error(`the wide run ended ${wide.doc.status}: ${JSON.stringify(wide.doc.error)}`);
    const tetraloopMs = Math.round(wide.wallMs);
    const after = await commandCounts(info);
    const retained = await usedMemory(redis);
    const runKeys = await runKeysBytes(redis, wide.doc.runId);
    log(`  wide: tetraloop ${tetraloopMs} ms`);
    const langGraphMs = Math.round(await langGraphMap(tools.url, WIDE.ms)(WIDE.items));
    const plainMs = Math.round(await plainCalls(tools.url, WIDE.items, WIDE.ms));
    log(`  wide: langgraph ${langGraphMs} ms, plain ${plainMs} ms`);
    const perItem = (n: number, digits = 1): number => Number((n / WIDE.items).toFixed(digits));
    return {
      waves,
      wide: {
        items: WIDE.items,
        itemMs: WIDE.ms,
        concurrency: CONCURRENCY,
        tetraloopMs,
        langGraphMs,
        plainMs,
        commandsPerItem: perItem(after.commands - before.commands),
        scriptsPerItem: perItem(after.scripts - before.scripts, 2),
        peakBytesPerItem: Math.round(perItem(peak - baseline)),
        retainedBytesPerItem: Math.round(perItem(retained - baseline)),
        runKeysBytesPerItem: Math.round(perItem(runKeys.bytes)),
        runKeys: runKeys.keys,
        toolCallsPerItem: perItem(wide.doc.usage.toolCalls, 3),
      },
      settings: {
        toolConcurrency: TOOL_CONCURRENCY,
        mapConcurrency: CONCURRENCY,
        langGraphMaxConcurrency: CONCURRENCY,
        waves: WAVES,
        wide: WIDE,
        memorySampleMs: MEMORY_SAMPLE_MS,
        item: 'http tool → loopback /work?ms=D (LangGraph.js: fetch of the same URL)',
        processes: 'the API and the plan and tool pools in this process; LangGraph.js in this process',
      },
    };
  } finally {
    redis.disconnect();
    await stack.close();
    await tools.close();
  }
}

export function mapTable(result: MapResult): string {
  const { waves, wide } = result;
  const wideFloor = Math.ceil(wide.items / wide.concurrency) * wide.itemMs;
  const of = (ms: number, floor: number): string => (ms / floor).toFixed(2);
  return [
    '| work | floor ms | Tetraloop ms | LangGraph.js `Send` ms | plain loop ms | Tetraloop ÷ floor | LangGraph.js ÷ floor | plain ÷ floor |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    `| ${waves.items} items × ${waves.itemMs} ms, concurrency ${waves.concurrency} (medians of ${waves.tetraloopRunsMs.length}) | ${waves.floorMs} | ${waves.tetraloopMs} | ${waves.langGraphMs} | ${waves.plainMs} | **${of(waves.tetraloopMs, waves.floorMs)}** | ${of(waves.langGraphMs, waves.floorMs)} | ${of(waves.plainMs, waves.floorMs)} |`,
    `| ${wide.items} items × ${wide.itemMs} ms, concurrency ${wide.concurrency} (once) | ${wideFloor} | ${wide.tetraloopMs} | ${wide.langGraphMs} | ${wide.plainMs} | ${of(wide.tetraloopMs, wideFloor)} | ${of(wide.langGraphMs, wideFloor)} | ${of(wide.plainMs, wideFloor)} |`,
    '',
    `${wide.items} items × ${wide.itemMs} ms, per item: **${wide.commandsPerItem} Redis commands** (${wide.scriptsPerItem} of them script calls); Redis memory **${wide.peakBytesPerItem} bytes** at the peak while it ran (used_memory above the baseline), ${wide.retainedBytesPerItem} bytes left once settled (used_memory after − before), ${wide.runKeysBytesPerItem} bytes by MEMORY USAGE of the ${wide.runKeys} keys naming the run; ${wide.toolCallsPerItem} tool calls per item (above 1: retried items).`,
  ].join('\n');
}
