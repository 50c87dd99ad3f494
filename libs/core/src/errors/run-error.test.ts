import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type NodeErrorData } from './node-error.js';
import { limitError } from './limit-error.js';
import { RUN_ERROR_CODES, RUN_ERROR_STATUS, RunError, failureReplans, runErrorForNode } from './run-error.js';

const nodeError = (code: (typeof ERROR_CODES)[number]): NodeErrorData =>
  ({
    code,
    message: 'boom',
    ...(code === 'budget_exhausted' ? { budget: 'tokens' } : {}),
    ...(code === 'suspected_loop' ? { executions: 6 } : {}),
    ...(code === 'blocked_by_lesson' ? { lessonId: 'main.abc' } : {}),
  }) as NodeErrorData;

describe('run errors', () => {
  it('map every node error class to the run error it becomes', () => {
    const codes = Object.fromEntries(ERROR_CODES.map((c) => [c, runErrorForNode('n', nodeError(c)).code]));
    expect(codes).toEqual({
      network: 'node_failed',
      timeout: 'node_failed',
      rate_limited: 'node_failed',
      server: 'node_failed',
      auth: 'node_failed',
      validation: 'node_failed',
      aborted: 'node_failed',
      budget_exhausted: 'budget_exhausted',
      suspected_loop: 'suspected_loop',
      blocked_by_lesson: 'node_failed',
      internal: 'node_failed',
    });
    expect(runErrorForNode('fetch', nodeError('server'))).toEqual({
      code: 'node_failed',
      message: 'node "fetch" failed: boom',
      nodeId: 'fetch',
      cause: { code: 'server', message: 'boom' },
    });
    expect(ERROR_CODES.filter((c) => failureReplans(nodeError(c)))).toEqual([
      'budget_exhausted',
      'suspected_loop',
      'blocked_by_lesson',
    ]);
    // Money spent stays spent across a replan: another plan would only fail again.
    for (const budget of ['costUsd', 'dailyCostUsd'] as const) {
      expect(failureReplans({ code: 'budget_exhausted', message: 'spent', budget })).toBe(false);
    }
    // A node not started before its TTL goes back to the planner that set it; a slow call does not.
    expect(failureReplans({ code: 'timeout', message: 'late', expired: true })).toBe(true);
    expect(failureReplans({ code: 'timeout', message: 'slow' })).toBe(false);
  });

  it('give every run error code the status it ends a run with, and reject unknown codes', () => {
    expect(Object.keys(RUN_ERROR_STATUS).sort()).toEqual([...RUN_ERROR_CODES].sort());
    expect(RUN_ERROR_STATUS.timed_out).toBe('timed_out');
    expect(RUN_ERROR_STATUS.parent_ended).toBe('cancelled');
    expect(RunError.safeParse({ code: 'oops', message: 'x' }).success).toBe(false);
  });

  it('report a call cut off by a limit as what it is', () => {
    expect(limitError({ kind: 'timeout', ms: 50 }, 'model call')).toEqual({
      code: 'timeout',
      message: 'model call timed out after 50 ms',
    });
    expect(limitError({ kind: 'timeout', ms: 50 })).toEqual({
      code: 'timeout',
      message: 'timed out after 50 ms',
    });
    expect(limitError({ kind: 'deadline', ms: 0 }).code).toBe('aborted');
    expect(limitError({ kind: 'budget', ms: 0 })).toMatchObject({
      code: 'budget_exhausted',
      budget: 'toolTimeMs',
    });
  });
});
