/**
 * Plugin hooks around a tool call: `before_tool_call` may rewrite the args, block the call, or
 * require approval — the call then waits for the signal `approve.<nodeId>` (`{"approved": true}`
 * lets it go); `after_tool_call` observes the outcome.
 */
import type { BeforeToolCall } from '../nodes/index.js';
import type { ToolOutcome } from '../tools/tool.js';
import { awaitSignal, type NodeContext } from './node-context.js';

/** How long an approval may take before the call is refused. */
const APPROVAL_TIMEOUT_SECONDS = 3600;

export const approvalSignal = (nodeId: string): string => `approve.${nodeId.replaceAll('/', '.')}`;

export async function beforeToolCall(ctx: NodeContext, tool: string, args: unknown): Promise<BeforeToolCall> {
  const registry = ctx.deps.hooks.registry;
  if (!registry?.has('before_tool_call')) return { ok: true, args };
  const { ctx: after, results } = await registry.run(
    'before_tool_call',
    { runId: ctx.plan.runId, nodeId: ctx.node.id, tool, args },
    (c, r) => (r.args !== undefined ? { ...c, args: r.args } : c),
    (r) => r.block !== undefined || r.requireApproval !== undefined,
  );
  const last = results.at(-1);
  if (last?.block !== undefined)
    return { ok: false, error: { code: 'validation', message: `blocked: ${last.block}` } };
  if (last?.requireApproval !== undefined) {
    const signal = approvalSignal(ctx.node.id);
    const answer = await awaitSignal(ctx, signal, APPROVAL_TIMEOUT_SECONDS);
    if (!answer.delivered)
      return { ok: false, error: { code: 'timeout', message: `no approval (${signal}) in time` } };
    if ((answer.payload as { approved?: unknown } | null)?.approved !== true) {
      return { ok: false, error: { code: 'validation', message: `not approved: ${last.requireApproval}` } };
    }
  }
  return { ok: true, args: after.args };
}

export async function afterToolCall(
  ctx: NodeContext,
  tool: string,
  args: unknown,
  outcome: ToolOutcome,
): Promise<void> {
  const registry = ctx.deps.hooks.registry;
  if (!registry?.has('after_tool_call')) return;
  await registry.emit('after_tool_call', {
    runId: ctx.plan.runId,
    nodeId: ctx.node.id,
    tool,
    args,
    ok: outcome.ok,
    ...(outcome.ok ? { output: outcome.output } : { error: outcome.error }),
  });
}
