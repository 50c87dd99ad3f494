/**
 * A wait node's sleep to a time (`until`, `forMs`). The job parks in BullMQ's delayed set until
 * the wake time, holding no worker slot; nothing promotes it early. The wake time is kept in the
 * run's record by the first call (`sleep-state-6.lua`), so a job that re-enters, or that a worker or
 * Redis restart hands to another worker, sleeps to the same instant, and `node.woke` is appended
 * once whichever job finds the sleep over.
 */
import { park, type NodeContext } from './node-context.js';

export async function sleepUntil(
  ctx: NodeContext,
  wakeAt: number,
): Promise<{ readonly wakeAt: number; readonly woke: boolean }> {
  const now = Date.now();
  const state = await ctx.deps.store.sleepState(ctx.plan.runId, ctx.node.id, wakeAt, now, {
    status: 'waiting',
  });
  if (state.woke) return state;
  // A sleep never outlives its run: at the deadline the job comes back to be cut off by it.
  const deadline = ctx.begin.deadlineAt ?? Infinity;
  if (now >= deadline) return { wakeAt: state.wakeAt, woke: false };
  return park(ctx, Math.min(state.wakeAt, deadline));
}
