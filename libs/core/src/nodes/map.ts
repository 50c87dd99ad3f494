/**
 * A `map` node: one item template run per element of a list known only at run time. The template
 * is one node (`node`), run per item as a node of its own, `<mapId>[<index>]`, under the same
 * harness as any node (retries by class, limits, budgets, snapshots); it may reference `item` and
 * `index`. Or it is a whole graph (`graph`), run per item as a child run of the item's node, as a
 * loop runs its nested graph, with `{item, index, …input}` as its input. At most `concurrency`
 * items run at once; the map settles when every item has, its output the items' outputs in item
 * order. How items run is in docs/execution-model.md#map-nodes.
 */
import { z } from 'zod';
import type { NodeSnapshot } from '../domain/node-snapshot.js';
import { NodeId, OnError, type AnyNode, type GraphOf } from '../graph/schema.js';
import { mapOutcome } from '../map/map-outcome.js';
import type { ExecutableKindSpec, NodeRun, PlannerEntry } from './kind.js';
import { llmKind } from './llm.js';
import type { LoopNode } from './loop.js';
import { toolKind } from './tool.js';

/** Items run at once unless the node says otherwise, and the most it may say. */
export const MAP_CONCURRENCY = { default: 10, max: 1000 } as const;
/** The longest list a map takes unless the node says otherwise, and the most it may say. */
export const MAP_MAX_ITEMS = { default: 1000, max: 10_000 } as const;

/** The kinds an item template may be: kinds a worker executes, but not a map. */
const TEMPLATE_KINDS: ReadonlySet<string> = new Set(['tool', 'llm', 'wait', 'loop']);

export const MapNode = z.strictObject({
  id: NodeId,
  kind: z.literal('map'),
  /** A reference to the list: `{"$ref": "<node>.output.<path>"}` or `{"$ref": "input.<path>"}`. */
  over: z.strictObject({ $ref: z.string().min(1) }),
  /** The item template: one node without an id, checked like a node of its kind. */
  node: z.record(z.string(), z.unknown()).optional(),
  /** Or a whole graph per item, run as a child run; its nodes may reference `item` and `index`. */
  graph: z.unknown().optional(),
  /**
   * With `graph`: more of what the item's graph reads as `input.*` beside `item` and `index`; may
   * reference the map's dependencies and the item.
   */
  input: z.record(z.string(), z.unknown()).optional(),
  concurrency: z.number().int().min(1).max(MAP_CONCURRENCY.max).default(MAP_CONCURRENCY.default),
  maxItems: z.number().int().min(1).max(MAP_MAX_ITEMS.max).default(MAP_MAX_ITEMS.default),
  /** `fail`: the first failed item (after its retries) fails the map; `continue`: it is `{error}` in the output. */
  onItemError: z.enum(['fail', 'continue']).default('fail'),
  /** With `continue`: how many items must succeed, a count (an integer from 1) or a fraction (below 1). */
  minSuccess: z.number().positive().optional(),
  onError: OnError.optional(),
});
export type MapNode = z.infer<typeof MapNode>;

/** What an item's graph reads as its input besides `input`'s fields. */
const ITEM_INPUT = { item: { $ref: 'item' }, index: { $ref: 'index' } } as const;

/**
 * The node item `index` runs: the template under the item's id; for a graph template, a loop of
 * one iteration over that graph, which runs it as a child run (`itemSnapshotOf` takes its output).
 */
export function itemNodeOf(map: MapNode, id: string): AnyNode {
  if (map.graph === undefined) return { ...(map.node ?? {}), id } as AnyNode;
  const loop: LoopNode = {
    id,
    kind: 'loop',
    body: { graph: map.graph as GraphOf, input: { ...map.input, ...ITEM_INPUT } },
    maxIterations: 1,
    intervalMs: 0,
  };
  return loop;
}

/**
 * An item's snapshot as the map keeps it. For a graph template the loop that ran it answers
 * `{last, lastError?}`: the item's output is the child run's, and a child run that failed fails
 * the item with its error.
 */
export function itemSnapshotOf(map: MapNode, snapshot: NodeSnapshot): NodeSnapshot {
  if (map.graph === undefined || snapshot.status !== 'succeeded') return snapshot;
  const { last, lastError } = (snapshot.output ?? {}) as {
    last?: unknown;
    lastError?: NodeSnapshot['error'];
  };
  return lastError
    ? { ...snapshot, status: 'failed', output: undefined, error: lastError }
    : { ...snapshot, output: last ?? null };
}

async function runMap(run: NodeRun<MapNode>): Promise<NodeSnapshot> {
  const { node } = run;
  const list = run.resolve(node.over);
  if (!Array.isArray(list)) {
    return run.fail({
      code: 'validation',
      message: `over (${node.over.$ref}) is ${list === undefined ? 'missing' : typeof list}, not a list`,
    });
  }
  if (list.length > node.maxItems) {
    return run.fail({
      code: 'validation',
      reason: 'too_many_items',
      message: `over (${node.over.$ref}) has ${list.length} items; maxItems is ${node.maxItems}`,
    });
  }
  const items = await run.mapItems(list, {
    concurrency: node.concurrency,
    stopOnFailure: node.onItemError === 'fail',
  });
  const outcome = mapOutcome(node, items);
  return outcome.ok ? run.snapshot('succeeded', { output: outcome.output }) : run.fail(outcome.error);
}

function checkMap(
  node: MapNode,
  check: Parameters<ExecutableKindSpec<MapNode>['check']>[1],
): MapNode | undefined {
  let ok = checkMinSuccess(node, check);
  if (node.graph !== undefined) {
    if (node.node !== undefined) {
      check.issue(['graph'], 'a map runs one node ("node") or one graph ("graph") per item, not both');
      return undefined;
    }
    for (const name of Object.keys(node.input ?? {}).filter((name) => name in ITEM_INPUT)) {
      check.issue(['input', name], `"${name}" is the item's own: the graph reads it as input.${name}`);
      ok = false;
    }
    const graph = check.itemGraph(node.graph, ['graph']);
    return ok && graph ? { ...node, graph } : undefined;
  }
  if (node.input !== undefined) {
    check.issue(['input'], 'input is what a graph template reads; a node template references what it needs');
    ok = false;
  }
  if (!node.node) {
    check.issue(['node'], 'a map needs its item template: "node" (one node) or "graph"');
    return undefined;
  }
  const kind = node.node.kind;
  if (typeof kind !== 'string' || !TEMPLATE_KINDS.has(kind)) {
    check.issue(['node', 'kind'], `an item template is a ${[...TEMPLATE_KINDS].join(', ')} node`);
    return undefined;
  }
  if ('id' in node.node) {
    check.issue(['node', 'id'], 'an item template takes its id from the map (<mapId>[<index>])');
    ok = false;
  }
  const template = check.template({ ...node.node, id: node.id }, ['node']);
  if (!ok || !template) return undefined;
  const { id: _id, ...rest } = template;
  return { ...node, node: rest };
}

function checkMinSuccess(node: MapNode, check: Parameters<ExecutableKindSpec<MapNode>['check']>[1]): boolean {
  if (node.minSuccess === undefined) return true;
  if (node.onItemError !== 'continue') {
    check.issue(['minSuccess'], 'minSuccess needs onItemError "continue"');
    return false;
  }
  if (node.minSuccess >= 1 && !Number.isInteger(node.minSuccess)) {
    check.issue(['minSuccess'], 'a count of items (an integer) or a fraction below 1');
    return false;
  }
  return true;
}

/**
 * What a planned map's item template may be: a planned tool or llm node without its id, and
 * without a TTL (an item's expiry is its map's business, never handed back to the planner).
 */
const withoutId = (entry: PlannerEntry | undefined): z.ZodType =>
  (entry!.schema as z.ZodObject).omit({
    id: true,
    ttlMs: true,
    expiresAt: true,
    onExpire: true,
    fallback: true,
  });
const PlannedTemplate = z.union([withoutId(toolKind.planner), withoutId(llmKind.planner)]);

export const mapKind: ExecutableKindSpec<MapNode> = {
  kind: 'map',
  schema: MapNode,
  // The graph template's references are its own (checked as a nested graph), not the map's.
  referenceFields: [['over'], ['node'], ['input']],
  itemFields: ['node', 'input'],
  check: checkMap,
  planner: {
    schema: z.object({
      id: z.string(),
      kind: z.literal('map'),
      over: z.object({ $ref: z.string() }),
      node: PlannedTemplate,
      concurrency: z.number().int().optional(),
      onItemError: z.enum(['fail', 'continue']).optional(),
      onError: OnError.optional(),
    }),
    rule: 'A "map" node repeats one step for each element of a list that only an earlier node\'s output holds (search results, rows, files): {"id", "kind": "map", "over": {"$ref": "<id>.output.<path to the list>"}, "node": {a "tool" or "llm" node without "id", reading the element as {"$ref": "item.<path>"} or "{{item.<path>}}" and its position as "{{index}}"}}; optional "concurrency" (items at once, default 10) and "onItemError": "continue" (a failed item is {"error"} in the output; default: it fails the map). Its output is the list of the items\' outputs, in order. Use it instead of guessing how many nodes a list needs.',
    carries: (node) =>
      node.graph !== undefined
        ? [{ at: ['graph'], kind: 'graph' }]
        : [{ at: ['node', 'kind'], kind: (node.node as { kind?: unknown } | undefined)?.kind }],
  },
  variesOnRetry: false,
  mayBeFallback: false,
  // A planned map that fails in a window is news for the next window, as a tool node's failure is.
  replansInWindow: true,
  // Items retry on their own; the map itself is never run again for a failure.
  retry: () => undefined,
  retryable: false,
  chargesToolCall: false,
  usesToolTime: false,
  defaultTimeout: 'per-call',
  timeoutMs: () => undefined,
  // It parks until its items settle.
  mayRunHandedOff: false,
  declaredToolCall: () => undefined,
  label: () => 'map',
  continuesOnFailure: (node) => node.onError === 'continue',
  replansOnFailure: (node) => node.onError === 'replan',
  // Each item charges what it used as it completes.
  charge: () => ({}),
  run: runMap,
};
