/**
 * A wait node: done when its named signal arrives (the signal's body is its output), or when its
 * timeout passes. Meanwhile its job sits in BullMQ's delayed set until the timeout, holding no
 * worker slot; delivering the signal promotes it.
 */
import { DelayedError } from 'bullmq';
import type { WaitNode } from '../graph/schema.js';
import type { NodeSnapshot } from '../runs/run-model.js';
import { snapshotOf, type NodeContext } from './node-context.js';

export async function runWaitNode(ctx: NodeContext, node: WaitNode): Promise<NodeSnapshot> {
  const state = await awaitSignal(ctx, node.signal, node.timeoutSeconds);
  if (state.delivered) return snapshotOf(ctx, 'succeeded', { output: state.payload });
  const error = {
    code: 'timeout' as const,
    message: `no signal "${node.signal}" within ${node.timeoutSeconds} s`,
  };
  const output =
    node.onTimeout === 'continue' ? { error: { code: error.code, message: error.message } } : undefined;
  return snapshotOf(ctx, 'failed', { error, ...(output ? { output } : {}) });
}

/**
 * The signal's payload once it has arrived, or `{delivered: false}` once the timeout has passed.
 * Until then the job parks in the delayed set (throws DelayedError) and is promoted by the signal.
 */
export async function awaitSignal(
  ctx: NodeContext,
  signal: string,
  timeoutSeconds: number,
): Promise<{ delivered: boolean; payload: unknown }> {
  const { store } = ctx.engine;
  const runId = ctx.plan.runId;
  const nodeId = ctx.node.id;
  // A wait never outlives its run's deadline.
  const proposed = Math.min(Date.now() + timeoutSeconds * 1000, ctx.begin.deadlineAt ?? Infinity);
  const live = { status: 'waiting' as const, until: new Date(proposed).toISOString() };
  const state = await store.waitState(runId, nodeId, signal, proposed, live);
  if (state.delivered || Date.now() >= state.deadlineAt) return state;
  if (ctx.token === undefined) throw new Error('waiting for a signal needs a worker token to park');
  await ctx.job.updateData({ ...(ctx.job.data as object), continuation: true });
  await ctx.job.moveToDelayed(state.deadlineAt, ctx.token);
  // A signal that arrived between the check above and the move found no delayed job to promote:
  // look once more, now that the job is parked.
  const again = await store.waitState(runId, nodeId, signal, state.deadlineAt, {
    ...live,
    until: new Date(state.deadlineAt).toISOString(),
  });
  if (again.delivered) await ctx.job.promote().catch(() => undefined);
  throw new DelayedError();
}
