/**
 * What a call cut off by a limit reports. Only the node's own timeout is a `timeout`; a call cut
 * off by the run's deadline is `aborted` (the run timed out), one cut off by the tool-time budget
 * is `budget_exhausted`. Pure.
 */
import type { NodeErrorData } from './node-error.js';

/** Which limit binds a call: the node's timeout, the run's deadline or its tool-time budget. */
export type LimitKind = 'timeout' | 'deadline' | 'budget';

/** The error of a call stopped by `limit` (after `ms`); `subject` names the call in a timeout. */
export function limitError(limit: { kind: LimitKind; ms: number }, subject = ''): NodeErrorData {
  switch (limit.kind) {
    case 'deadline':
      return { code: 'aborted', message: 'the run deadline passed' };
    case 'budget':
      return {
        code: 'budget_exhausted',
        message: 'the run used up its tool-time budget',
        budget: 'toolTimeMs',
      };
    case 'timeout':
      return { code: 'timeout', message: `${subject ? `${subject} ` : ''}timed out after ${limit.ms} ms` };
  }
}
