import { describe, expect, it } from 'vitest';
import { PlanCache } from './plan-cache.js';
import type { RunPlan } from '../state/runs/run-plan.js';

/** A store that answers a one-node plan for any run and counts its reads by run. */
function countingStore(): { store: { plan(runId: string): Promise<RunPlan> }; reads: Map<string, number> } {
  const reads = new Map<string, number>();
  return {
    reads,
    store: {
      plan(runId) {
        reads.set(runId, (reads.get(runId) ?? 0) + 1);
        return Promise.resolve({
          agentId: 'main',
          tenant: 'default',
          priority: 5,
          maxParallelNodes: null,
          metadata: null,
          sessionKey: null,
          plan: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }], edges: [] },
          input: null,
          timeoutSeconds: 60,
          onBudget: 'fail',
          reusesSnapshots: false,
          generation: 0,
        } as RunPlan);
      },
    },
  };
}

describe('PlanCache', () => {
  it('reads a plan once and drops the one used longest ago when full', async () => {
    const { store, reads } = countingStore();
    const cache = new PlanCache(store, 2);
    await cache.get('a');
    await cache.get('a');
    await cache.get('b');
    // `a` asked again: now the newest, so `b` is the one used longest ago.
    await cache.get('a');
    await cache.get('a');
    await cache.get('c');
    await cache.get('a');
    expect(reads.get('a')).toBe(1);
    await cache.get('b');
    expect(reads.get('b')).toBe(2);
  });

  it('keeps each generation of a run apart', async () => {
    const { store, reads } = countingStore();
    const cache = new PlanCache(store);
    expect((await cache.get('r', 0))?.nodes.has('a')).toBe(true);
    await cache.get('r', 1);
    await cache.get('r', 0);
    expect(reads.get('r')).toBe(2);
  });
});
