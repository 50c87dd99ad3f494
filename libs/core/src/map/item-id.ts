/**
 * The node id of a map's item: `<mapId>[<index>]`. Node ids never hold `[` (graph/schema.ts
 * `NodeId`), so an item id is never a node of the plan and names its map and index unambiguously;
 * it keeps a job id (`<runId>.<itemId>`) free of `:`, as BullMQ requires. Pure.
 */
export const itemId = (mapId: string, index: number): string => `${mapId}[${index}]`;

const ITEM_ID = /^(.+)\[(\d{1,5})\]$/;

/** The map and index an item id names, or undefined for any other node id. */
export function parseItemId(id: string): { mapId: string; index: number } | undefined {
  const match = ITEM_ID.exec(id);
  if (!match) return undefined;
  return { mapId: match[1]!, index: Number(match[2]) };
}

/** The reference roots a map's item template may use besides the graph's: the item and its index. */
export const ITEM_ROOTS: ReadonlySet<string> = new Set(['item', 'index']);
