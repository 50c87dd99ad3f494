/** A `tool` node: one call of a registered tool, with its dependencies' results as arguments. */
import { z } from 'zod';
import type { NodeSnapshot } from '../domain/node-snapshot.js';
import { Args, CallNodeFields, PlannedNodeFields } from '../graph/schema.js';
import { findSecretRefs } from '../secrets/secret-ref.js';
import type { ExecutableKindSpec, NodeRun } from './kind.js';

export const ToolNode = z.strictObject({
  ...CallNodeFields,
  kind: z.literal('tool'),
  tool: z.string().min(1).max(128),
  args: Args.default({}),
});
export type ToolNode = z.infer<typeof ToolNode>;

async function runToolNode(run: NodeRun<ToolNode>): Promise<NodeSnapshot> {
  const name = run.node.tool;
  const tool = run.tools.get(name);
  if (!tool)
    return run.snapshot('failed', { error: { code: 'validation', message: `unknown tool "${name}"` } });
  const before = await run.beforeToolCall(name, run.resolve(run.node.args));
  if (!before.ok) return run.fail(before.error);
  run.recordInput(before.args);
  const outcome = await run.callTool(tool, before.args, run.usage.toolTimeMs, {
    index: '0',
    secrets: findSecretRefs(run.node.args),
  });
  await run.afterToolCall(name, before.args, outcome);
  if (outcome.ok) return run.snapshot('succeeded', { output: outcome.output });
  return run.fail(outcome.error);
}

export const toolKind: ExecutableKindSpec<ToolNode> = {
  kind: 'tool',
  schema: ToolNode,
  referenceFields: [['args'], ['retry', 'vary'], ['fallback']],
  check: (node, check) => (check.toolCall(node.tool, node.args, []) ? node : undefined),
  planner: {
    schema: z.object({
      id: z.string(),
      kind: z.literal('tool'),
      tool: z.string(),
      args: z.record(z.string(), z.unknown()),
      ...PlannedNodeFields,
    }),
    rule: 'A "tool" node: {"id", "kind": "tool", "tool": <a tool from the catalog>, "args": {...}} — args must fit the tool\'s schema.',
  },
  variesOnRetry: true,
  mayBeFallback: true,
  replansInWindow: true,
  retry: (node) => node.retry,
  retryable: true,
  chargesToolCall: true,
  usesToolTime: true,
  defaultTimeout: 'tool',
  timeoutMs: (node) => node.timeoutMs,
  mayRunHandedOff: true,
  declaredToolCall: (node) => ({ tool: node.tool, args: node.args }),
  label: (node) => node.tool,
  continuesOnFailure: (node) => node.onError === 'continue',
  replansOnFailure: (node) => node.onError === 'replan',
  charge: (snapshot) => {
    const last = snapshot.attempts.at(-1);
    return last ? { toolTimeMs: last.durationMs } : {};
  },
  run: runToolNode,
};
