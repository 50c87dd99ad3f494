/**
 * How close each executor comes to the critical path: graphs of `http` nodes calling the loopback
 * tool server with set delays, run by Tetraloop (submitted through the API, awaited through
 * /wait), sequentially in-process (each call in topological order) and by LangGraph.js
 * in-process. The figure is wall time ÷ the longest delay-weighted path.
 *
 * The API, both pools, the tool server and this client share one process, unless
 * BENCH_WORKER_PROCESSES=1: then the plan and tool pools are `tetraloop worker` child processes (the
 * build, when there is one), as a deployment runs them, and the API, the tool server and the client
 * stay here.
 */
import { setMaxListeners } from 'node:events';
import { startToolServer } from '../test/support/tool-server.js';
import {
  chain,
  criticalPathMs,
  fanOut,
  langGraphHttp,
  randomDag,
  runSequential,
  tetraloopGraph,
  totalDelayMs,
  unevenBranches,
  type Dag,
} from './support/dag.js';
import type { RunDocument } from '@tetraloop/core/domain';
import { median, startBenchStack, timedRun } from './support/stack.js';
import { spawnWorker, stopAll, waitForClients } from './throughput.js';

const REPEATS = 3;
const TOOL_CONCURRENCY = 64;
const RANDOM_SEEDS = [1, 2, 3, 4, 5];

export interface CriticalPathRow {
  shape: string;
  nodes: number;
  edges: number;
  minDelayMs: number;
  lowerBoundMs: number;
  sumOfDelaysMs: number;
  /** The median of `tetraloopRunsMs`. */
  tetraloopMs: number;
  /** Wall ms of each Tetraloop run, in order. */
  tetraloopRunsMs: number[];
  /** Null when the run left the comparisons out. */
  sequentialMs: number | null;
  langGraphMs: number | null;
  /** Where Tetraloop's time over the bound goes: medians over its runs, from the run documents. */
  timeline: RunTimeline;
}

/**
 * From a run document (millisecond timestamps): `startLagMs`, creation to the first node start;
 * `sourceSpreadMs`, first to last start among the nodes without parents; `settleLagMs`, the last
 * node's finish to the run's.
 */
export interface RunTimeline {
  startLagMs: number;
  sourceSpreadMs: number;
  settleLagMs: number;
}

function timelineOf(dag: Dag, doc: RunDocument): RunTimeline {
  const at = (iso: string | null | undefined): number => (iso ? Date.parse(iso) : NaN);
  const nodes = doc.nodes as Record<string, { startedAt?: string | null; finishedAt?: string | null }>;
  const created = at(doc.createdAt);
  const starts = dag.nodes.map((n) => at(nodes[n.id]?.startedAt));
  const hasParent = new Set(dag.edges.map(([, to]) => to));
  const sourceStarts = dag.nodes.filter((n) => !hasParent.has(n.id)).map((n) => at(nodes[n.id]?.startedAt));
  const lastFinish = Math.max(...dag.nodes.map((n) => at(nodes[n.id]?.finishedAt)));
  return {
    startLagMs: Math.min(...starts) - created,
    sourceSpreadMs: Math.max(...sourceStarts) - Math.min(...sourceStarts),
    settleLagMs: at(doc.finishedAt) - lastFinish,
  };
}

export function shapes(): Dag[] {
  return [
    fanOut(32, 100),
    unevenBranches(1000, 8, 100),
    chain(50, 20),
    ...RANDOM_SEEDS.map((seed) => randomDag(seed, 40, 20, 200)),
  ];
}

/**
 * The shapes and repeats of a full run, narrowed by the environment for an A/B of one shape:
 * `BENCH_SHAPES=fan-out,chain` keeps the shapes whose names start so, `BENCH_REPEATS=20` runs each
 * that many times (3 by default).
 */
export function optionsFromEnv(env: NodeJS.ProcessEnv = process.env): CriticalPathOptions {
  const prefixes =
    env.BENCH_SHAPES?.split(',')
      .map((p) => p.trim())
      .filter(Boolean) ?? [];
  const repeats = Number(env.BENCH_REPEATS ?? REPEATS);
  return {
    shapes: shapes().filter((dag) => prefixes.length === 0 || prefixes.some((p) => dag.name.startsWith(p))),
    repeats: Number.isInteger(repeats) && repeats > 0 ? repeats : REPEATS,
    comparisons: true,
  };
}

export interface CriticalPathOptions {
  shapes: Dag[];
  /** Tetraloop (and LangGraph.js) runs of each shape; each figure is their median. */
  repeats: number;
  /** Also run each shape sequentially and on LangGraph.js. */
  comparisons: boolean;
}

export async function runCriticalPath(
  log: (line: string) => void = console.log,
  { shapes: dags, repeats, comparisons }: CriticalPathOptions = optionsFromEnv(),
): Promise<{ rows: CriticalPathRow[]; settings: Record<string, unknown> }> {
  // LangGraph.js adds one abort listener per parallel task to the run's signal.
  setMaxListeners(100);
  const tools = await startToolServer();
  const workerProcesses = process.env.BENCH_WORKER_PROCESSES === '1';
  const stack = await startBenchStack(
    { TETRALOOP_TOOL_CONCURRENCY: String(TOOL_CONCURRENCY) },
    workerProcesses ? { pools: [] } : {},
  );
  const workers = workerProcesses
    ? (['plan', 'tool'] as const).map((pool) => spawnWorker(stack, pool, TOOL_CONCURRENCY))
    : [];
  const rows: CriticalPathRow[] = [];
  try {
    await waitForClients(
      stack.env.REDIS_URL!,
      workers.map((w) => w.pid!),
    );
    // Warm-up: scripts loaded, connections open, JIT warm, in every executor.
    const warm = chain(3, 5, 'w');
    await timedRun(stack.url, { graph: tetraloopGraph(warm, tools.url) });
    if (comparisons) await langGraphHttp(warm, tools.url)();
    for (const dag of dags) {
      const tetraloop: number[] = [];
      const timelines: RunTimeline[] = [];
      const langGraph: number[] = [];
      const invoke = langGraphHttp(dag, tools.url);
      for (let i = 0; i < repeats; i++) {
        const { doc, wallMs } = await timedRun(stack.url, { graph: tetraloopGraph(dag, tools.url) });
        if (doc.status !== 'succeeded')
          throw new Error(`${dag.name} ended ${doc.status}: ${JSON.stringify(doc.error)}`);
        tetraloop.push(wallMs);
        timelines.push(timelineOf(dag, doc));
        if (!comparisons) continue;
        const started = performance.now();
        await invoke();
        langGraph.push(performance.now() - started);
      }
      const row: CriticalPathRow = {
        shape: dag.name,
        nodes: dag.nodes.length,
        edges: dag.edges.length,
        minDelayMs: Math.min(...dag.nodes.map((n) => n.ms)),
        lowerBoundMs: criticalPathMs(dag),
        sumOfDelaysMs: totalDelayMs(dag),
        tetraloopMs: Math.round(median(tetraloop)),
        tetraloopRunsMs: tetraloop.map(Math.round),
        // Sequential time is the sum of the delays plus per-call overhead: one run is enough.
        sequentialMs: comparisons ? Math.round(await runSequential(dag, tools.url)) : null,
        langGraphMs: comparisons ? Math.round(median(langGraph)) : null,
        timeline: {
          startLagMs: median(timelines.map((t) => t.startLagMs)),
          sourceSpreadMs: median(timelines.map((t) => t.sourceSpreadMs)),
          settleLagMs: median(timelines.map((t) => t.settleLagMs)),
        },
      };
      rows.push(row);
      log(
        `  ${row.shape.padEnd(40)} bound ${String(row.lowerBoundMs).padStart(5)}  tetraloop ${row.tetraloopMs}` +
          (comparisons ? `  sequential ${row.sequentialMs}  langgraph ${row.langGraphMs}` : ''),
      );
    }
  } finally {
    await stopAll(workers);
    await stack.close();
    await tools.close();
  }
  return {
    rows,
    settings: {
      pools: workerProcesses ? 'tetraloop worker processes (plan, tool)' : 'in the benchmark process',
      repeats,
      comparisons,
      sequentialRepeats: 1,
      toolConcurrency: TOOL_CONCURRENCY,
      randomDag: {
        nodes: 40,
        delayMs: [20, 200],
        edgeProbability: 0.08,
        prng: 'mulberry32',
        seeds: RANDOM_SEEDS,
      },
    },
  };
}

const ratio = (a: number | null, b: number | null): string =>
  a === null || b === null ? '—' : (a / b).toFixed(2);

export function criticalPathTable(rows: readonly CriticalPathRow[]): string {
  const lines = [
    '| graph | nodes | lower bound ms | Tetraloop ms | sequential ms | LangGraph.js ms | Tetraloop ÷ bound | sequential ÷ bound | LangGraph.js ÷ bound | LangGraph.js ÷ Tetraloop |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.shape} | ${r.nodes} | ${r.lowerBoundMs} | ${r.tetraloopMs} | ${r.sequentialMs ?? '—'} | ${r.langGraphMs ?? '—'} | ${ratio(r.tetraloopMs, r.lowerBoundMs)} | ${ratio(r.sequentialMs, r.lowerBoundMs)} | ${ratio(r.langGraphMs, r.lowerBoundMs)} | ${ratio(r.langGraphMs, r.tetraloopMs)} |`,
    );
  }
  lines.push(
    '',
    'Tetraloop run timeline (medians, from the run documents, ms): creation → first node start; first → last start among the nodes without parents; last node finish → run settled.',
    '',
    '| graph | wall − bound | start lag | source start spread | settle lag |',
    '|---|---:|---:|---:|---:|',
  );
  for (const r of rows) {
    lines.push(
      `| ${r.shape} | ${r.tetraloopMs - r.lowerBoundMs} | ${r.timeline.startLagMs} | ${r.timeline.sourceSpreadMs} | ${r.timeline.settleLagMs} |`,
    );
  }
  return lines.join('\n');
}

const escapeXml = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A grouped bar chart (hand-written SVG) of wall ÷ lower bound per graph shape and executor. */
export function criticalPathSvg(rows: readonly CriticalPathRow[]): string {
  // A run without the comparisons has no LangGraph.js or sequential bar to draw.
  const ofBound = (ms: number | null, r: CriticalPathRow): number | null =>
    ms === null ? null : ms / r.lowerBoundMs;
  const series = [
    { label: 'Tetraloop', color: '#2563eb', value: (r: CriticalPathRow) => ofBound(r.tetraloopMs, r) },
    { label: 'LangGraph.js', color: '#f59e0b', value: (r: CriticalPathRow) => ofBound(r.langGraphMs, r) },
    { label: 'sequential', color: '#9ca3af', value: (r: CriticalPathRow) => ofBound(r.sequentialMs, r) },
  ];
  const left = 60;
  const top = 40;
  const plotHeight = 300;
  const group = 90;
  const bar = 22;
  const width = left + rows.length * group + 20;
  const height = top + plotHeight + 110;
  // Log scale: sequential is up to ~30× the bound, the others near 1×.
  const maxValue = Math.max(2, ...rows.flatMap((r) => series.map((s) => s.value(r) ?? 0)));
  const logMax = Math.log10(maxValue * 1.2);
  const y = (v: number): number => top + plotHeight - (Math.log10(Math.max(v, 1)) / logMax) * plotHeight;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${left}" y="18" font-size="14" font-weight="bold">Wall time ÷ critical-path lower bound (log scale, lower is better)</text>`,
  ];
  for (const tick of [1, 1.1, 1.5, 2, 5, 10, 20, 50].filter((t) => t <= maxValue * 1.2)) {
    parts.push(
      `<line x1="${left}" x2="${width - 10}" y1="${y(tick)}" y2="${y(tick)}" stroke="${tick === 1.1 ? '#dc2626' : '#e5e7eb'}"${tick === 1.1 ? ' stroke-dasharray="4 3"' : ''}/>`,
      `<text x="${left - 6}" y="${y(tick) + 4}" text-anchor="end">${tick}×</text>`,
    );
  }
  rows.forEach((r, i) => {
    const x0 = left + i * group + (group - series.length * bar) / 2;
    series.forEach((s, j) => {
      const v = s.value(r);
      if (v === null) return;
      const yTop = y(v);
      parts.push(
        `<rect x="${x0 + j * bar}" y="${yTop}" width="${bar - 2}" height="${top + plotHeight - yTop}" fill="${s.color}"><title>${escapeXml(`${r.shape} — ${s.label}: ${v.toFixed(2)}×`)}</title></rect>`,
        `<text x="${x0 + j * bar + (bar - 2) / 2}" y="${yTop - 3}" text-anchor="middle" font-size="9">${v.toFixed(v < 10 ? 2 : 1)}</text>`,
      );
    });
    const label = r.shape.replace(/ \(.*\)$/, '').replace(/^random DAG /, 'random ');
    const cx = left + i * group + group / 2;
    parts.push(
      `<text x="${cx}" y="${top + plotHeight + 14}" text-anchor="end" transform="rotate(-30 ${cx} ${top + plotHeight + 14})">${escapeXml(label)}</text>`,
    );
  });
  parts.push(
    `<line x1="${left}" x2="${width - 10}" y1="${top + plotHeight}" y2="${top + plotHeight}" stroke="black"/>`,
  );
  series.forEach((s, j) => {
    const lx = left + j * 120;
    parts.push(
      `<rect x="${lx}" y="${height - 18}" width="12" height="12" fill="${s.color}"/>`,
      `<text x="${lx + 16}" y="${height - 8}">${s.label}</text>`,
    );
  });
  parts.push(
    `<text x="${left + series.length * 120}" y="${height - 8}" fill="#dc2626">- - 1.10× target</text>`,
    '</svg>',
  );
  return parts.join('\n') + '\n';
}
