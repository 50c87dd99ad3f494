/**
 * A `map` node: one item template run per element of a list known only at run time. The template
 * is one node (`node`), run per item as a node of its own, `<mapId>[<index>]`, under the same
 * harness as any node (retries by class, limits, budgets, snapshots); it may reference `item` and
 * `index`. At most `concurrency` items run at once; the map settles when every item has, its output
 * the items' outputs in item order. How items run is in docs/execution-model.md#map-nodes.
 */
import { z } from 'zod';
import type { NodeSnapshot } from '../domain/node-snapshot.js';
import { NodeId, OnError, type AnyNode } from '../graph/schema.js';
import { mapOutcome } from '../map/map-outcome.js';
import type { ExecutableKindSpec, NodeRun } from './kind.js';

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
  /** A whole graph per item: not supported yet (validation says so at the field). */
  graph: z.unknown().optional(),
  concurrency: z.number().int().min(1).max(MAP_CONCURRENCY.max).default(MAP_CONCURRENCY.default),
  maxItems: z.number().int().min(1).max(MAP_MAX_ITEMS.max).default(MAP_MAX_ITEMS.default),
  /** `fail`: the first failed item (after its retries) fails the map; `continue`: it is `{error}` in the output. */
  onItemError: z.enum(['fail', 'continue']).default('fail'),
  /** With `continue`: how many items must succeed, a count (an integer from 1) or a fraction (below 1). */
  minSuccess: z.number().positive().optional(),
  onError: OnError.optional(),
});
export type MapNode = z.infer<typeof MapNode>;

/** The node item `index` runs: the template under the item's id. */
export const itemNodeOf = (map: MapNode, id: string): AnyNode => ({ ...(map.node ?? {}), id }) as AnyNode;

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
  let ok = true;
  if (node.graph !== undefined) {
    check.issue(['graph'], 'graph templates are not supported yet; give one node as "node"');
    ok = false;
  }
  if (!node.node) {
    if (node.graph === undefined) check.issue(['node'], 'a map needs its item template: "node"');
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
  if (!template) ok = false;
  if (node.minSuccess !== undefined) {
    if (node.onItemError !== 'continue') {
      check.issue(['minSuccess'], 'minSuccess needs onItemError "continue"');
      ok = false;
    } else if (node.minSuccess >= 1 && !Number.isInteger(node.minSuccess)) {
      check.issue(['minSuccess'], 'a count of items (an integer) or a fraction below 1');
      ok = false;
    }
  }
  if (!ok || !template) return undefined;
  const { id: _id, ...rest } = template;
  return { ...node, node: rest };
}

export const mapKind: ExecutableKindSpec<MapNode> = {
  kind: 'map',
  schema: MapNode,
  referenceFields: [['over'], ['node']],
  itemTemplate: 'node',
  check: checkMap,
  variesOnRetry: false,
  mayBeFallback: false,
  replansInWindow: false,
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
