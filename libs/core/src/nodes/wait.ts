/**
 * A `wait` node: done when its named signal arrives (`POST /v1/runs/:id/signals/:name`; the
 * signal's body is its output), or when its timeout passes. Meanwhile its job sits in BullMQ's
 * delayed set until the timeout, holding no worker slot; delivering the signal promotes it. The
 * signal is accepted only while the node waits, or earlier with `acceptEarly`.
 */
import { z } from 'zod';
import type { NodeSnapshot } from '../domain/node-snapshot.js';
import { NodeId } from '../graph/schema.js';
import type { ExecutableKindSpec, NodeRun } from './kind.js';

export const WaitNode = z.strictObject({
  id: NodeId,
  kind: z.literal('wait'),
  signal: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}'),
  timeoutSeconds: z
    .number()
    .positive()
    .max(30 * 24 * 3600)
    .default(3600),
  onTimeout: z.enum(['fail', 'continue']).default('fail'),
  /**
   * Accept the signal before the node waits for it (it is kept until the node runs). Without it a
   * signal is accepted only while the node waits. @defaultValue false
   */
  acceptEarly: z.boolean().optional(),
});
export type WaitNode = z.infer<typeof WaitNode>;

async function runWaitNode(run: NodeRun<WaitNode>): Promise<NodeSnapshot> {
  const { node } = run;
  const state = await run.awaitSignal(node.signal, node.timeoutSeconds);
  if (state.delivered) return run.snapshot('succeeded', { output: state.payload });
  const error = {
    code: 'timeout' as const,
    message: `no signal "${node.signal}" within ${node.timeoutSeconds} s`,
  };
  const output =
    node.onTimeout === 'continue' ? { error: { code: error.code, message: error.message } } : undefined;
  return run.snapshot('failed', { error, ...(output ? { output } : {}) });
}

export const waitKind: ExecutableKindSpec<WaitNode> = {
  kind: 'wait',
  schema: WaitNode,
  referenceFields: [],
  check: (node) => node,
  variesOnRetry: false,
  mayBeFallback: false,
  replansInWindow: false,
  // A wait has one outcome per signal: nothing to retry.
  retryable: false,
  retry: () => undefined,
  chargesToolCall: false,
  usesToolTime: false,
  defaultTimeout: 'per-call',
  // Its own `timeoutSeconds` bounds the wait; no call limit applies.
  timeoutMs: () => undefined,
  // It parks until its signal or its timeout.
  mayRunHandedOff: false,
  declaredToolCall: () => undefined,
  label: () => 'wait',
  continuesOnFailure: (node) => node.onTimeout === 'continue',
  replansOnFailure: () => false,
  charge: () => ({}),
  run: runWaitNode,
};
