/**
 * A map's graph template (`{"kind": "map", "graph": …}`) as the child run of each item runs it.
 * Its nodes read the item as they would in a one-node template (`{"$ref": "item.url"}`,
 * `"{{index}}"`); the child run gets `{item, index, …the map's input}` as its input, so those
 * references become `input.item.url` and `input.index`. Only the template's own nodes are
 * rewritten: a graph nested inside it reads its own input. Pure.
 */
import { ITEM_ROOTS } from '../map/item-id.js';
import { isNodeKind, mapReferenceFields, type GraphNode } from '../nodes/index.js';
import { rewrite } from './expand.js';

const toInput = (root: string, path: readonly string[]): string =>
  [...(ITEM_ROOTS.has(root) ? ['input', root] : [root]), ...path].join('.');

/** `raw` (a graph not validated yet) with its nodes' item references reading the child run's input. */
export function itemGraphOf(raw: unknown): unknown {
  if (typeof raw !== 'object' || raw === null || !Array.isArray((raw as { nodes?: unknown }).nodes))
    return raw;
  const graph = raw as { nodes: unknown[] };
  return {
    ...graph,
    nodes: graph.nodes.map((node) =>
      typeof node === 'object' && node !== null && isNodeKind((node as { kind?: unknown }).kind)
        ? mapReferenceFields(node as GraphNode, (value) => rewrite(value, toInput))
        : node,
    ),
  };
}
