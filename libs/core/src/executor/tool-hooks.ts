/**
 * Plugin hooks around a tool call: `before_tool_call` may rewrite the args, block the call, or
 * require approval — the call then waits for the signal `approve.<nodeId>.<nonce>`, whose nonce is
 * drawn when the call is held (`{"approved": true}` lets it go); `after_tool_call` observes the
 * outcome.
 */
import { createHash, randomBytes } from 'node:crypto';
import { DEFAULT_APPROVAL_TIMEOUT_SECONDS } from '../domain/wait-limits.js';
import type { BeforeToolCall } from '../nodes/index.js';
import type { ToolOutcome } from '../tools/tool.js';
import { awaitSignal, type NodeContext } from './node-context.js';

/** The prefix of a node's approval signals; the nonce follows it. */
export const approvalPrefix = (nodeId: string): string => `approve.${nodeId.replaceAll('/', '.')}.`;

/**
 * One held call, named so that the same request (same node, generation, attempt, agent turn, tool
 * and args) finds its nonce again when the job re-enters, and any other request draws a new one.
 */
function holdKey(ctx: NodeContext, tool: string, args: unknown, request: string | undefined): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([tool, args ?? null]))
    .digest('hex')
    .slice(0, 16);
  return `${ctx.node.id}#g${ctx.generation}.a${ctx.attempt}${request ? `.${request}` : ''}.${digest}`;
}

export async function beforeToolCall(
  ctx: NodeContext,
  tool: string,
  args: unknown,
  request?: string,
): Promise<BeforeToolCall> {
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
    const answer = await awaitSignal(
      ctx,
      {
        key: holdKey(ctx, tool, after.args, request),
        signal: approvalPrefix(ctx.node.id),
        nonce: randomBytes(12).toString('hex'),
        approval: { tool, reason: last.requireApproval },
      },
      // A person may take days to answer; the run's deadline still cuts the wait off (awaitSignal).
      ctx.deps.approvalTimeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    );
    if (!answer.delivered)
      return { ok: false, error: { code: 'timeout', message: `no approval (${answer.signal}) in time` } };
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
