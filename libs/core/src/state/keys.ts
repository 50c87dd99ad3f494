/**
 * Every Redis key and channel Tetraloop uses, built in one place. The keys of one run share the
 * hash tag `{runId}` so a run's multi-key scripts stay on one Redis Cluster slot.
 */
import { createHash } from 'node:crypto';

export interface RunKeys {
  /** Hash: status, timestamps, graph, input, output, error. */
  readonly meta: string;
  /** Hash nodeId → dependencies not yet completed (readiness counters). */
  readonly pending: string;
  /** Hash nodeId → immutable snapshot JSON, written once. */
  readonly nodes: string;
  /** Hash nodeId → transient `{status: queued|running|retrying|waiting, …}` until the snapshot exists. */
  readonly live: string;
  /** Stream of the run's events, ids `0-<seq>`. */
  readonly events: string;
  /** Hash of execution bookkeeping: executions and attempts per node, loop progress, usage, signals. */
  readonly aux: string;
}

export function runKeys(prefix: string, runId: string): RunKeys {
  const base = `${prefix}:run:{${runId}}`;
  return {
    meta: base,
    pending: `${base}:pending`,
    nodes: `${base}:nodes`,
    live: `${base}:live`,
    events: `${base}:events`,
    aux: `${base}:aux`,
  };
}

/** All keys of a run, in the order every run script expects them. */
export function runKeyList(keys: RunKeys): string[] {
  return [keys.meta, keys.pending, keys.nodes, keys.live, keys.events, keys.aux];
}

/** Idempotency keys are hashed so a client cannot choose key length or characters. */
export function idempotencyKey(prefix: string, clientKey: string): string {
  return `${prefix}:idem:${createHash('sha256').update(clientKey).digest('hex')}`;
}

export interface Channels {
  /** Published with a run id when the run's outcome is decided as not succeeded: abort its nodes. */
  readonly abort: string;
  /** Published with a run id once the run has settled (every node final). */
  readonly settled: string;
}

export function channels(prefix: string): Channels {
  return { abort: `${prefix}:runs:abort`, settled: `${prefix}:runs:settled` };
}
