/**
 * What a map's settled items make of the map (pure): its output, the items' outputs in item
 * order, or its failure — the first failed item when failures stop it, too few successes for
 * `minSuccess`, or items that never completed.
 */
import type { NodeSnapshot } from '../domain/node-snapshot.js';
import type { NodeErrorData } from '../errors/node-error.js';

export interface MapPolicy {
  readonly onItemError: 'fail' | 'continue';
  /** A count (an integer from 1) or a fraction (below 1) of the items that must succeed. */
  readonly minSuccess?: number | undefined;
}

export type MapOutcome = { ok: true; output: unknown[] } | { ok: false; error: NodeErrorData };

/** How many of `total` items `minSuccess` asks to succeed. */
export const requiredSuccesses = (minSuccess: number | undefined, total: number): number =>
  minSuccess === undefined ? 0 : minSuccess < 1 ? Math.ceil(minSuccess * total) : minSuccess;

/** An item with no snapshot: its job died for good, or a failure stopped the map before it ran. */
const LOST: NodeErrorData = { code: 'internal', message: 'the item did not complete' };

const errorOf = (snapshot: NodeSnapshot | undefined): NodeErrorData | undefined =>
  snapshot === undefined
    ? LOST
    : snapshot.status === 'succeeded'
      ? undefined
      : (snapshot.error ?? { code: 'aborted', message: `the item was ${snapshot.status}` });

export function mapOutcome(policy: MapPolicy, items: readonly (NodeSnapshot | undefined)[]): MapOutcome {
  const errors = items.map(errorOf);
  const failedAt = errors.findIndex((e) => e !== undefined);
  if (policy.onItemError === 'fail' && failedAt >= 0) {
    const error = errors[failedAt]!;
    return { ok: false, error: { ...error, message: `item ${failedAt} failed: ${error.message}` } };
  }
  const succeeded = errors.filter((e) => e === undefined).length;
  const required = requiredSuccesses(policy.minSuccess, items.length);
  if (succeeded < required) {
    return {
      ok: false,
      error: {
        code: 'validation',
        reason: 'min_success',
        message: `${succeeded} of ${items.length} items succeeded; minSuccess asks for ${required}`,
      },
    };
  }
  return {
    ok: true,
    output: items.map((snapshot, i) => {
      const error = errors[i];
      return error ? { error: { code: error.code, message: error.message } } : (snapshot?.output ?? null);
    }),
  };
}
