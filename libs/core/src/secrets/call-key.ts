/**
 * The `Idempotency-Key` an outbound call carries: an HMAC-SHA256, under a per-deployment key, of
 * the run, the node, the generation and the call's index within the node's execution. The same on
 * every retry and redelivery of one call, different for every other call (each loop iteration,
 * each tool call of an agent's answer), and it reveals nothing: not the run id, not the node.
 * Pure: no I/O.
 */
import { createHmac } from 'node:crypto';

export interface CallIdentity {
  readonly runId: string;
  readonly nodeId: string;
  readonly generation: number;
  /** Which call of the node: `0` for a tool node's one call, `<iteration>` or `<iteration>.<call>` in loops. */
  readonly call: string;
}

export function callIdempotencyKey(key: Buffer, id: CallIdentity): string {
  return createHmac('sha256', key)
    .update([id.runId, id.nodeId, String(id.generation), id.call].join('\u0000'))
    .digest('hex');
}
