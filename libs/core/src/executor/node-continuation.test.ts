import { describe, expect, it } from 'vitest';
import { NodeJobData } from '../queues/catalog.js';
import { enteredAtOf } from './node-context.js';

const FIRST = '2026-01-01T00:00:00.000Z';
const job = (data: Partial<NodeJobData>): NodeJobData => ({
  runId: 'r',
  nodeId: 'n',
  generation: 0,
  ...data,
});

describe('when a node job re-entering as a continuation first started', () => {
  it('is its first entry when the attempt that parked it is the one running', () => {
    const parked = NodeJobData.parse(job({ continuation: true, enteredAt: FIRST, enteredAttempt: 2 }));
    expect(enteredAtOf(parked, 2)).toBe(FIRST);
  });

  it('is not the earlier attempt’s entry once BullMQ retries the job as a new attempt', () => {
    // The job's data outlives its attempt: the retry still carries what the parked attempt marked.
    const retried = NodeJobData.parse(job({ continuation: true, enteredAt: FIRST, enteredAttempt: 1 }));
    expect(enteredAtOf(retried, 2)).toBeUndefined();
  });

  it('is its first entry for a job parked before the attempt was kept with it', () => {
    expect(enteredAtOf(NodeJobData.parse(job({ continuation: true, enteredAt: FIRST })), 3)).toBe(FIRST);
  });

  it('is nothing for a job that is no continuation', () => {
    expect(enteredAtOf(NodeJobData.parse(job({ enteredAt: FIRST, enteredAttempt: 1 })), 1)).toBeUndefined();
  });
});
