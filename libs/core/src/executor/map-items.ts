/**
 * The harness's side of map nodes (`nodes/map.ts`): the node an item id names, what its references
 * read, enqueueing a map's items under its job, completing an item and enqueueing the next of its
 * lane, and reading the settled items for the map. Nothing here runs for a run without a map.
 */
import { createHash } from 'node:crypto';
import { WaitingChildrenError } from 'bullmq';
import { isBlobStub } from '../domain/blob.js';
import type { NodeSnapshot } from '../domain/run-model.js';
import { ITEM_ROOTS, itemId, parseItemId } from '../map/item-id.js';
import {
  executionOf,
  itemNodeOf,
  itemSnapshotOf,
  type ExecutableNode,
  type MapNode,
} from '../nodes/index.js';
import { enqueueItems, nodeJobAttempts } from '../queues/run-jobs.js';
import type { MapItem } from '../state/runs/run-store.js';
import { retryTableFor, type ExecutorDeps } from './deps.js';
import { markContinuation, type NodeContext } from './node-context.js';
import { readsOf, type CompiledPlan } from './plan-cache.js';
import { queueOfNode, retryOfNode } from './tool-placement.js';

/** An item of a map in `plan`: its map, index and the node it runs. */
export interface PlannedItem {
  readonly mapId: string;
  readonly index: number;
  readonly node: ExecutableNode;
}

/** The item `id` names, when it names one of a map of `plan`. */
export function plannedItem(plan: CompiledPlan, id: string): PlannedItem | undefined {
  const parsed = parseItemId(id);
  const map = parsed && plan.nodes.get(parsed.mapId);
  if (!parsed || map?.kind !== 'map') return undefined;
  return { ...parsed, node: itemNodeOf(map, id) as ExecutableNode };
}

/** The nodes whose snapshots an item reads: its template's references but `item` and `index`. */
export const itemReads = (item: PlannedItem): string[] =>
  readsOf(item.node).filter((root) => !ITEM_ROOTS.has(root));

/** What an item's references read besides the graph's: its element and index. */
export const itemScope = (item: PlannedItem, value: unknown): Record<string, unknown> => ({
  item: value,
  index: item.index,
});

type ItemDeps = Pick<ExecutorDeps, 'queues' | 'retries' | 'lessons' | 'tools'>;

async function enqueue(
  deps: ItemDeps,
  plan: CompiledPlan,
  generation: number,
  map: MapNode,
  items: readonly MapItem[],
): Promise<void> {
  const table = retryTableFor(deps as ExecutorDeps);
  await enqueueItems(
    deps.queues,
    plan.runId,
    generation,
    map.id,
    items.map(({ index, item }) => {
      const node = itemNodeOf(map, itemId(map.id, index)) as ExecutableNode;
      const queue = queueOfNode(deps.tools, node);
      return {
        id: node.id,
        item,
        attempts: nodeJobAttempts(node, table, deps.lessons?.maxRetries, retryOfNode(deps.tools, node)),
        ...(queue ? { queue } : {}),
      };
    }),
  );
}

/**
 * Writes an item's snapshot once (a large output as a blob first) and enqueues the next item of
 * its lane as a child of the map's job, before this job finishes: the map cannot settle early, and
 * a redelivery answers the same next item again.
 */
export async function completeItem(
  ctx: NodeContext,
  item: PlannedItem,
  snapshot: NodeSnapshot,
  existed: boolean,
  withBlob: (snapshot: NodeSnapshot) => Promise<NodeSnapshot>,
): Promise<void> {
  const { deps, plan } = ctx;
  const map = plan.nodes.get(item.mapId);
  const kept = map?.kind === 'map' ? itemSnapshotOf(map, snapshot) : snapshot;
  const stored = existed ? kept : await withBlob(kept);
  const done = await deps.store.completeItem(plan.runId, item.mapId, item.index, stored, {
    generation: ctx.generation,
    charge: existed ? {} : executionOf(item.node).charge(snapshot),
  });
  if (done.next && done.status === 'running' && done.generation === ctx.generation && map?.kind === 'map') {
    await enqueue(deps, plan, ctx.generation, map, [done.next]);
  }
}

/** A map's list, with its definition: a different one drops the items of an earlier execution. */
const fingerprintOf = (node: MapNode, items: readonly unknown[]): string =>
  createHash('sha256').update(JSON.stringify({ node, items })).digest('hex');

/**
 * `NodeRun.mapItems`: on the map job's first entry, starts its items (`map-start-6.lua`) and
 * enqueues each lane's first unfinished item under its job; then parks in waiting-children until
 * every item settled, and answers their snapshots in item order with their blobs loaded.
 */
export async function mapItems(
  ctx: NodeContext & { node: MapNode },
  items: readonly unknown[],
  options: { concurrency: number; stopOnFailure: boolean },
): Promise<(NodeSnapshot | undefined)[]> {
  const { deps, plan, node, job } = ctx;
  if (ctx.token === undefined) throw new Error('a map node needs a worker token to wait for its items');
  if (!ctx.continuation) {
    const { status, heads } = await deps.store.startMap(plan.runId, node.id, {
      generation: ctx.generation,
      concurrency: options.concurrency,
      fingerprint: fingerprintOf(node, items),
      stopOnFailure: options.stopOnFailure,
      items,
    });
    if (status === 'running') await enqueue(deps, plan, ctx.generation, node, heads);
    // Set after the items are enqueued: a redelivery before it starts them again (a no-op).
    await markContinuation(ctx);
  }
  if (await job.moveToWaitingChildren(ctx.token)) throw new WaitingChildrenError();
  return withItemBlobs(deps, plan.tenant, await deps.store.itemSnapshots(plan.runId, node.id, items.length));
}

/** Item snapshots whose outputs are blobs, with the content in their place (the map's output holds it). */
async function withItemBlobs(
  deps: Pick<ExecutorDeps, 'store'>,
  tenant: string,
  snapshots: (NodeSnapshot | undefined)[],
): Promise<(NodeSnapshot | undefined)[]> {
  const stubs = snapshots.flatMap((s) => (s && isBlobStub(s.output) ? [s.output] : []));
  if (stubs.length === 0) return snapshots;
  const contents = await deps.store.blobs.contents(tenant, stubs);
  return snapshots.map((s) => {
    if (!s || !isBlobStub(s.output)) return s;
    const content = contents.get(s.output.$blob);
    return content === undefined ? s : { ...s, output: content };
  });
}
