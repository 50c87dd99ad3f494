/**
 * How long a tool call may take: the tightest of the node's timeout, the time left before the
 * run's deadline and the tool time left in the run's budget. Knowing which limit binds lets a
 * cut-off call be reported as what it is (timeout, run timed out, budget exhausted). Pure.
 */
import type { LimitKind } from '../errors/limit-error.js';

export type { LimitKind };

export interface CallLimit {
  readonly ms: number;
  readonly kind: LimitKind;
}

export function callLimit(input: {
  nodeTimeoutMs: number;
  now: number;
  deadlineAt: number | null;
  toolTimeBudgetMs: number | undefined;
  toolTimeUsedMs: number;
}): CallLimit {
  const candidates: CallLimit[] = [{ ms: input.nodeTimeoutMs, kind: 'timeout' }];
  if (input.deadlineAt !== null) candidates.push({ ms: input.deadlineAt - input.now, kind: 'deadline' });
  if (input.toolTimeBudgetMs !== undefined) {
    candidates.push({ ms: input.toolTimeBudgetMs - input.toolTimeUsedMs, kind: 'budget' });
  }
  return candidates.reduce((a, b) => (b.ms < a.ms ? b : a));
}
