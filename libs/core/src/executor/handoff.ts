/**
 * Node handoff: a node job that releases ready dependents runs them itself, at once, in the same
 * job and worker slot, instead of adding a job for each and waiting for a worker to fetch it: one
 * down a chain, up to the handoff width side by side when a completion releases several. A hop
 * then costs the completing script and the next start script, not a queue round trip, a wake-up
 * and BullMQ's job bookkeeping. The others are enqueued as usual.
 *
 * Why it keeps the execution model's guarantees:
 * - the carrying job stays active while its handed-off nodes run, so the run's root job stays in
 *   waiting-children: it cannot finalize early;
 * - a crash leaves the carrying job to stall and be redelivered; its node's snapshot exists, so
 *   the redelivery re-completes it and the handed-off nodes below it (as deep as a job may hand
 *   off) and enqueues whatever they had released: nothing is stranded;
 * - snapshots are still written once, by the same scripts;
 * - a handed-off node that must wait (a retry's backoff, a signal, an approval, a flow-control
 *   hold, a budget pause) moves to a job of its own, with the attempts it has made.
 *
 * Pure: which released nodes a job may take, in its order of preference.
 */
import { DEFAULT_NODE_PRIORITY } from '../graph/schema.js';
import { hasTtl } from '../graph/task-ttl.js';
import { executionOf, type ExecutableNode } from '../nodes/index.js';
import { isReservedToolName } from '../tools/custom-tool.js';

/** Thrown inside a handed-off node that has to park: it goes on in a job of its own. */
export class OwnJobNeeded extends Error {
  constructor(readonly reason: string) {
    super(`a handed-off node needs its own job to ${reason}`);
    this.name = 'OwnJobNeeded';
  }
}

/**
 * Whether a node may run handed off: a node of a kind that may (`mayRunHandedOff`: tool, llm; waits
 * and loops park by nature) without a TTL (a TTL counts from when its job was queued; a downgrade
 * is noted in its job).
 */
export function mayHandOff(node: ExecutableNode): boolean {
  return executionOf(node).mayRunHandedOff && !hasTtl(node);
}

const priorityOf = (node: ExecutableNode): number =>
  ('priority' in node && typeof node.priority === 'number' ? node.priority : undefined) ??
  DEFAULT_NODE_PRIORITY;

/**
 * The children a completing job may run next, in the order it prefers them: those that may be
 * handed off, in the graph's order, or in a run that prioritizes, highest priority first (the
 * graph's order among equals). `complete-node.lua` begins the first of them it released, as many
 * as the job may take.
 */
export function handoffCandidates(
  nodes: ReadonlyMap<string, ExecutableNode>,
  children: readonly string[],
  prioritized: boolean,
): string[] {
  const candidates = children.filter((id) => {
    const node = nodes.get(id);
    return node !== undefined && mayHandOff(node);
  });
  if (!prioritized) return candidates;
  // Array.prototype.sort is stable: equals keep the graph's order.
  return candidates.sort((a, b) => priorityOf(nodes.get(b)!) - priorityOf(nodes.get(a)!));
}

/**
 * How a new run's ready nodes start (`carrier-job.ts`): those that may be handed off, in groups of
 * up to `width`, each group one carrier job; the others get jobs of their own, as does a group of
 * one, in the order given. A custom tool's node is never carried: not every worker of its queue
 * need have its code, and a handed-off node skips the check that sends it on to one that has. It
 * is told by its tool's name (any name but a built-in's or an MCP tool's), not by a registry, so
 * every process groups a run's nodes alike.
 */
export function carriedStarts(
  nodes: ReadonlyMap<string, ExecutableNode>,
  ready: readonly string[],
  width: number,
): { carried: string[][]; own: string[] } {
  const may = ready.filter((id) => {
    const node = nodes.get(id);
    if (!node || !mayHandOff(node)) return false;
    const tool = executionOf(node).declaredToolCall(node)?.tool;
    return tool === undefined || isReservedToolName(tool);
  });
  const carried: string[][] = [];
  for (let from = 0; from < may.length; from += width) {
    const group = may.slice(from, from + width);
    if (group.length > 1) carried.push(group);
  }
  const inCarrier = new Set(carried.flat());
  return { carried, own: ready.filter((id) => !inCarrier.has(id)) };
}
