/**
 * What the planner is told of the planned nodes that expired unstarted (`graph/task-ttl.ts`): the
 * run handed them back to it, so the replan or the next window says which node it was, what it
 * was, and when it expired. A downgraded node ran its fallback and is not among them. Pure.
 */
import type { NodeSnapshot } from '../domain/run-model.js';
import type { NodeBase } from '../graph/schema.js';
import type { OnExpire } from '../graph/task-ttl.js';
import { truncate } from '../model/prompt-render.js';

/** How much of an expired node's definition the planner is shown. */
const DEFINITION_CHARS = 500;

export interface ExpiredNode {
  readonly id: string;
  /** The node as planned, without its id, as JSON cut to DEFINITION_CHARS. */
  readonly node: string;
  /** When it expired (ISO time). */
  readonly expiredAt: string;
  readonly onExpire: OnExpire;
}

/** The nodes of `nodes` whose snapshot says they expired and did not run (skipped or failed). */
export function expiredNodes(
  nodes: readonly NodeBase[],
  snapshots: ReadonlyMap<string, NodeSnapshot>,
): ExpiredNode[] {
  const expired: ExpiredNode[] = [];
  for (const node of nodes) {
    const s = snapshots.get(node.id);
    if (!s?.expired || s.expired.onExpire === 'downgrade') continue;
    const { id, ...definition } = node;
    expired.push({
      id,
      node: truncate(JSON.stringify(definition), DEFINITION_CHARS),
      expiredAt: s.expired.at,
      onExpire: s.expired.onExpire,
    });
  }
  return expired;
}

/** What the planner is told of them: that they did not run, and one line per node. */
export function expiredMessage(expired: readonly ExpiredNode[]): string {
  const lines = expired.map(
    (e) => `- ${e.id}: ${e.node}, not started before it expired at ${e.expiredAt} (onExpire "${e.onExpire}")`,
  );
  return `These nodes did not run: they were not started before they expired. Plan them again (with a time limit that fits) or do without them:\n${lines.join('\n')}`;
}
