/**
 * Where a run's time went, pure: from the run document's node views (snapshots, live states,
 * attempts, waits, throttled time), the plan's edges and the times its nodes became ready, each
 * node's queue wait, execution, retry backoff, throttled and parked time and tokens; the critical
 * path (the chain of dependent nodes with the largest summed duration); and how much of the wall
 * time the run kept busy (achieved parallelism) and how close it came to its critical path.
 *
 * A node's duration is its span: from its first attempt's start to its snapshot (or `now` while it
 * runs). The span splits into retry backoff (between one attempt's end and the next's start),
 * throttled time (its calls held back by flow control), parked time (waiting for a signal or an
 * approval) and execution (the rest). Its queue wait is ready → first start. A rerun's reused nodes
 * did not run in it: they count for nothing.
 *
 * A map node's span runs from when it started its items (its job's first entry; the snapshot's
 * start is the later entry that found them settled) to its snapshot: its wall time. Beside it, its
 * items' critical path (the longest lane of items, `map/map-timing.ts`), from the items' own
 * snapshots. Items kept from an earlier execution (started before the map's span) did not run in
 * it: they count for nothing either.
 */
import { z } from 'zod';
import { RunStatus, type RunEvent, type RunDocument, type NodeView } from '../domain/run-model.js';
import type { Edge } from '../graph/schema.js';
import { buildTopology } from '../graph/topology.js';
import type { NodeSnapshot } from '../domain/node-snapshot.js';
import { mapTiming, type ItemSpan } from '../map/map-timing.js';

const Ms = z.number().nonnegative();

/** A map node's items against its wall time (its `durationMs`). */
export const MapExplain = z.object({
  /** Items in its list. */
  total: z.number().int().nonnegative(),
  /** Items run at once: lane l runs items l, l + concurrency, … one after another. */
  concurrency: z.number().int().positive(),
  /** Items that ran in this execution of the map and finished. */
  ran: z.number().int().nonnegative(),
  /** Their durations (first start → snapshot), summed. */
  itemTimeMs: Ms,
  longestItemMs: Ms,
  /** The longest lane: its items' durations, summed; what the map would take with no cost per item. */
  itemsCriticalPathMs: Ms,
  /** Which lane that is; null when no item ran. */
  criticalLane: z.number().int().nonnegative().nullable(),
  /** The map's wall time ÷ its items' critical path; null without one. */
  wallOverItemsCriticalPath: z.number().nonnegative().nullable(),
});
export type MapExplain = z.infer<typeof MapExplain>;

/** One node of a run, as the explain answer shows where its time went. */
export const NodeExplain = z.object({
  id: z.string(),
  status: z.string(),
  /** On the critical path. */
  critical: z.boolean(),
  /** A rerun's copy of its origin's snapshot: it did not run in this run. */
  reused: z.boolean(),
  /** When it became ready (its dependencies done), as ISO time; null when not known or not yet. */
  readyAt: z.string().nullable(),
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  /** Its span: first start → snapshot (or now while running); 0 for a node that did not run. */
  durationMs: Ms,
  /** Ready → first start (ready → now while it is still queued). */
  queueWaitMs: Ms,
  executionMs: Ms,
  /** Backoff between its attempts. */
  retryWaitMs: Ms,
  /** Its calls held back by flow control. */
  throttledMs: Ms,
  /** Waiting for a signal or an approval. */
  parkedMs: Ms,
  attempts: z.number().int().nonnegative(),
  /** Prompt plus completion tokens of its model calls. */
  tokens: z.number().int().nonnegative(),
  /** A map node's items: present for a map that started them. */
  map: MapExplain.optional(),
});
export type NodeExplain = Readonly<z.infer<typeof NodeExplain>> & { readonly status: NodeView['status'] };

/** Where a run's time went (`GET /v1/runs/:id/explain`). */
export const RunExplain = z.object({
  runId: z.string(),
  status: RunStatus,
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  /** Start → settle (→ now while it runs); 0 for a run that never started. */
  wallMs: Ms,
  /** The summed durations of its nodes. */
  nodeTimeMs: Ms,
  /** The summed durations along the critical path. */
  criticalPathMs: Ms,
  /** Node time ÷ wall time: how many nodes were busy at once, on average; null without wall time. */
  parallelism: z.number().nonnegative().nullable(),
  /** Wall time ÷ critical path: 1 when the run took no longer than its longest chain; null without one. */
  wallOverCriticalPath: z.number().nonnegative().nullable(),
  /** The chain of dependent nodes with the largest summed duration, first to last. */
  criticalPath: z.array(z.object({ id: z.string(), durationMs: Ms })),
  totals: z.object({
    queueWaitMs: Ms,
    executionMs: Ms,
    retryWaitMs: Ms,
    throttledMs: Ms,
    parkedMs: Ms,
    tokens: z.number().int().nonnegative(),
  }),
  /** Every node of the plan, in plan order. */
  nodes: z.array(NodeExplain),
});
export type RunExplain = Omit<z.infer<typeof RunExplain>, 'nodes'> & { nodes: NodeExplain[] };

export interface ExplainInput {
  readonly document: Pick<RunDocument, 'runId' | 'status' | 'startedAt' | 'finishedAt' | 'nodes'>;
  /** The executable plan's node ids, in order, and edges. */
  readonly plan: { readonly ids: readonly string[]; readonly edges: readonly Edge[] };
  /** When each node last became ready (epoch ms), from its `node.queued` events. */
  readonly readyAt: ReadonlyMap<string, number>;
  /** Epoch ms: the end of what still runs. */
  readonly now: number;
  /** Each map node that started its items: its concurrency and its items' snapshots, in item order. */
  readonly maps?: ReadonlyMap<string, MapItemsInput>;
}

export interface MapItemsInput {
  readonly concurrency: number;
  /**
   * When the map started this execution of its items (epoch ms). Its snapshot's start is the
   * entry that found the items settled, after it parked: its span starts here instead.
   */
  readonly startedAt: number | null;
  readonly items: readonly (Pick<NodeSnapshot, 'startedAt' | 'finishedAt'> | undefined)[];
}

/** When each node last became ready: the time of its latest `node.queued` event. */
export function readyTimes(events: readonly RunEvent[]): Map<string, number> {
  const ready = new Map<string, number>();
  for (const event of events) {
    if (event.type === 'node.queued' && event.nodeId !== undefined) ready.set(event.nodeId, event.ts);
  }
  return ready;
}

const ms = (iso: string | null | undefined): number | null => {
  if (!iso) return null;
  const at = Date.parse(iso);
  return Number.isNaN(at) ? null : at;
};
const iso = (at: number | null): string | null => (at === null ? null : new Date(at).toISOString());
const ratio = (a: number, b: number): number | null => (b > 0 ? Math.round((a / b) * 1000) / 1000 : null);

interface Timing {
  readonly start: number | null;
  readonly end: number | null;
  readonly reused: boolean;
}

/** First start and end of a node: its first attempt's start (a live node's own), its snapshot or now. */
function timingOf(view: NodeView, now: number): Timing {
  const reused = 'reusedFrom' in view && typeof view.reusedFrom === 'string';
  if (reused) return { start: null, end: null, reused };
  const first = view.attempts[0]?.startedAt;
  switch (view.status) {
    case 'succeeded':
    case 'failed':
    case 'skipped':
    case 'cancelled': {
      const start = ms(view.startedAt ?? first);
      return { start, end: start === null ? null : ms(view.finishedAt), reused };
    }
    case 'running':
    case 'retrying':
    case 'waiting':
    case 'throttled': {
      const start = ms(first ?? view.startedAt);
      return { start, end: start === null ? null : now, reused };
    }
    case 'queued':
    case 'pending':
      return { start: null, end: null, reused };
  }
}

/** Time between one attempt's end and the next's start, in all. */
function retryWait(view: NodeView): number {
  let wait = 0;
  for (let i = 0; i + 1 < view.attempts.length; i++) {
    const end = ms(view.attempts[i]!.finishedAt);
    const next = ms(view.attempts[i + 1]!.startedAt);
    if (end !== null && next !== null) wait += Math.max(0, next - end);
  }
  return wait;
}

/** Time its waits held it (since → decided, or its deadline, or the node's end), within its span. */
function parked(view: NodeView, start: number, end: number): number {
  let total = 0;
  for (const wait of view.waits ?? []) {
    const from = Math.max(start, ms(wait.since) ?? start);
    const to = Math.min(end, ms(wait.decidedBy?.at) ?? ms(wait.until) ?? end);
    total += Math.max(0, to - from);
  }
  return total;
}

export function explainRun(input: ExplainInput): RunExplain {
  const { document, now } = input;
  const topology = buildTopology(input.plan.ids, input.plan.edges);
  const nodes: Omit<NodeExplain, 'critical'>[] = [];
  for (const id of input.plan.ids) {
    const view = document.nodes[id];
    if (!view) continue;
    const map = input.maps?.get(id);
    const { start, end, reused } = mapSpan(timingOf(view, now), map);
    const duration = start !== null && end !== null ? Math.max(0, end - start) : 0;
    const parents = topology.parents.get(id) ?? [];
    // Ready when its event says; without one (trimmed events), when its last dependency ended or,
    // for a source, when the run started.
    const readyAt =
      input.readyAt.get(id) ??
      (parents.length === 0
        ? ms(document.startedAt)
        : parents.reduce<number | null>((latest, p) => {
            const done = ms(finishedAtOf(document.nodes[p]));
            return latest === null || done === null ? null : Math.max(latest, done);
          }, 0));
    const queueWait =
      reused || readyAt === null
        ? 0
        : start !== null
          ? Math.max(0, start - readyAt)
          : view.status === 'queued'
            ? Math.max(0, now - readyAt)
            : 0;
    const retry = start === null ? 0 : retryWait(view);
    const throttled = start === null ? 0 : (view.throttledMs ?? 0);
    const waited = start === null || end === null ? 0 : parked(view, start, end);
    const usage = 'usage' in view ? view.usage : undefined;
    nodes.push({
      id,
      status: view.status,
      reused,
      readyAt: reused ? null : iso(readyAt),
      startedAt: iso(start),
      finishedAt: start === null ? null : finishedAtOf(view),
      durationMs: duration,
      queueWaitMs: queueWait,
      executionMs: Math.max(0, duration - retry - throttled - waited),
      retryWaitMs: retry,
      throttledMs: throttled,
      parkedMs: waited,
      attempts: reused ? 0 : view.attempts.length,
      tokens: reused ? 0 : (usage?.totalTokens ?? 0),
      ...mapOf(map, start, duration),
    });
  }
  const path = criticalPath(topology.ids, topology.parents, new Map(nodes.map((n) => [n.id, n.durationMs])));
  const onPath = new Set(path);
  const wallStart = ms(document.startedAt);
  const wallMs = wallStart === null ? 0 : Math.max(0, (ms(document.finishedAt) ?? now) - wallStart);
  const sum = (pick: (n: Omit<NodeExplain, 'critical'>) => number): number =>
    nodes.reduce((total, n) => total + pick(n), 0);
  const nodeTimeMs = sum((n) => n.durationMs);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const criticalPathMs = path.reduce((total, id) => total + (byId.get(id)?.durationMs ?? 0), 0);
  return {
    runId: document.runId,
    status: document.status,
    startedAt: document.startedAt,
    finishedAt: document.finishedAt,
    wallMs,
    nodeTimeMs,
    criticalPathMs,
    parallelism: ratio(nodeTimeMs, wallMs),
    wallOverCriticalPath: ratio(wallMs, criticalPathMs),
    criticalPath: path.map((id) => ({ id, durationMs: byId.get(id)?.durationMs ?? 0 })),
    totals: {
      queueWaitMs: sum((n) => n.queueWaitMs),
      executionMs: sum((n) => n.executionMs),
      retryWaitMs: sum((n) => n.retryWaitMs),
      throttledMs: sum((n) => n.throttledMs),
      parkedMs: sum((n) => n.parkedMs),
      tokens: sum((n) => n.tokens),
    },
    nodes: nodes.map((n) => ({ ...n, critical: onPath.has(n.id) })),
  };
}

/** A map's span starts when it started its items (its first entry), not at its snapshot's start. */
function mapSpan(timing: Timing, map: MapItemsInput | undefined): Timing {
  if (!map || map.startedAt === null || timing.start === null || timing.reused) return timing;
  return { ...timing, start: Math.min(timing.start, map.startedAt) };
}

/** A map's items against its span (from `start`, lasting `duration`); nothing for a map that has not started. */
function mapOf(
  items: MapItemsInput | undefined,
  start: number | null,
  duration: number,
): { map?: MapExplain } {
  if (!items || start === null) return {};
  const spans = items.items.map((item): ItemSpan | undefined => {
    const from = ms(item?.startedAt);
    const to = ms(item?.finishedAt);
    return from === null || to === null || from < start ? undefined : { start: from, end: to };
  });
  const timing = mapTiming(spans, items.concurrency);
  return {
    map: { ...timing, wallOverItemsCriticalPath: ratio(duration, timing.itemsCriticalPathMs) },
  };
}

/** A node's end as its view says: a snapshot's `finishedAt`; null before it has one. */
function finishedAtOf(view: NodeView | undefined): string | null {
  if (!view) return null;
  switch (view.status) {
    case 'succeeded':
    case 'failed':
    case 'skipped':
    case 'cancelled':
      return view.finishedAt;
    default:
      return null;
  }
}

/**
 * The path through the graph whose summed weights are largest, first to last: each node's longest
 * chain is its weight plus its parents' longest, in topological order. Of equal chains, the one met
 * first in `ids` order wins. Empty when no node has weight.
 */
export function criticalPath(
  ids: readonly string[],
  parents: ReadonlyMap<string, readonly string[]>,
  weight: ReadonlyMap<string, number>,
): string[] {
  const order = topologicalOrder(ids, parents);
  const longest = new Map<string, number>();
  const via = new Map<string, string | undefined>();
  for (const id of order) {
    let best: string | undefined;
    let bestLength = 0;
    for (const p of parents.get(id) ?? []) {
      const length = longest.get(p) ?? 0;
      if (best === undefined || length > bestLength) {
        best = p;
        bestLength = length;
      }
    }
    longest.set(id, (weight.get(id) ?? 0) + bestLength);
    via.set(id, best);
  }
  let end: string | undefined;
  for (const id of ids) {
    if (end === undefined || (longest.get(id) ?? 0) > (longest.get(end) ?? 0)) end = id;
  }
  if (end === undefined || (longest.get(end) ?? 0) === 0) return [];
  const path: string[] = [];
  for (let at: string | undefined = end; at !== undefined; at = via.get(at)) path.unshift(at);
  // Leading nodes of no weight (a chain's zero-time head) say nothing about where time went.
  while (path.length > 1 && (weight.get(path[0]!) ?? 0) === 0) path.shift();
  return path;
}

/** Kahn's order: parents before children, ties in `ids` order. Assumes the graph is acyclic. */
function topologicalOrder(ids: readonly string[], parents: ReadonlyMap<string, readonly string[]>): string[] {
  const waiting = new Map(ids.map((id) => [id, (parents.get(id) ?? []).length]));
  const children = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const id of ids) for (const p of parents.get(id) ?? []) children.get(p)?.push(id);
  const order: string[] = [];
  const ready = ids.filter((id) => waiting.get(id) === 0);
  while (ready.length > 0) {
    const id = ready.shift()!;
    order.push(id);
    for (const child of children.get(id) ?? []) {
      const left = (waiting.get(child) ?? 0) - 1;
      waiting.set(child, left);
      if (left === 0) ready.push(child);
    }
  }
  return order;
}
