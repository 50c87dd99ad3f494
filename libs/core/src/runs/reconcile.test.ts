import { describe, expect, it } from 'vitest';
import { reconcileAction, type QueuedRunFacts } from './reconcile.js';

const run = (facts: Partial<QueuedRunFacts>): QueuedRunFacts => ({
  status: 'queued',
  parentRunId: null,
  sessionKey: null,
  laneTurn: false,
  job: null,
  ...facts,
});

describe('reconcileAction', () => {
  it('enqueues a queued run without a root job, and replaces one that ended', () => {
    expect(reconcileAction(run({}))).toBe('enqueue');
    expect(reconcileAction(run({ job: 'failed' }))).toBe('retry');
    expect(reconcileAction(run({ job: 'completed' }))).toBe('retry');
  });
  it('leaves runs that wait legitimately', () => {
    for (const job of ['waiting', 'active', 'delayed', 'waiting-children', 'prioritized'] as const)
      expect(reconcileAction(run({ job }))).toBe('wait');
    expect(reconcileAction(run({ parentRunId: 'p' }))).toBe('wait');
    expect(reconcileAction(run({ sessionKey: 's', laneTurn: false }))).toBe('wait');
    expect(reconcileAction(run({ sessionKey: 's', laneTurn: true }))).toBe('enqueue');
  });
  it('drops runs that are gone or no longer queued', () => {
    expect(reconcileAction(run({ status: null }))).toBe('drop');
    expect(reconcileAction(run({ status: 'running' }))).toBe('drop');
    expect(reconcileAction(run({ status: 'cancelled' }))).toBe('drop');
  });
});
