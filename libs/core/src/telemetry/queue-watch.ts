/**
 * Queue depth gauges and the stall alarm: every check reads each queue's job counts; a queue
 * whose pending count has not changed for 6 consecutive checks while work is pending is stalled
 * (a whole pool down, or stuck), and its gauge turns 1.
 */
import type { Queue } from 'bullmq';
import { metrics } from './metrics.js';

export const STATES = ['waiting', 'prioritized', 'delayed', 'active', 'waiting-children', 'failed'] as const;
export const STALL_CHECKS = 6;

/** Pure: the next stall state of a queue from its previous state and its pending count now. */
export function nextStall(
  prev: { pending: number; unchanged: number } | undefined,
  pending: number,
): { pending: number; unchanged: number; stalled: boolean } {
  const unchanged = prev && prev.pending === pending && pending > 0 ? prev.unchanged + 1 : 0;
  return { pending, unchanged, stalled: unchanged >= STALL_CHECKS };
}

export class QueueWatch {
  private readonly state = new Map<string, { pending: number; unchanged: number }>();

  constructor(readonly queues: readonly Queue[]) {
    // Nothing is stalled until a check says so: the gauge exists from the start.
    for (const queue of queues) metrics.queueStalled.set({ queue: queue.name }, 0);
  }

  /** Reads the counts, updates the gauges; returns the stalled queues. */
  async check(): Promise<string[]> {
    try {
      const stalled = await this.read();
      metrics.redisUp.set(1);
      return stalled;
    } catch (err) {
      metrics.redisUp.set(0);
      throw err;
    }
  }

  /** Reads the counts into the depth gauges only (a scrape): the stall alarm keeps its own cadence. */
  async refresh(): Promise<void> {
    await this.read(false).then(
      () => metrics.redisUp.set(1),
      () => metrics.redisUp.set(0),
    );
  }

  private async read(trackStalls = true): Promise<string[]> {
    const stalled: string[] = [];
    for (const queue of this.queues) {
      const counts = await queue.getJobCounts(...STATES);
      for (const s of STATES) metrics.queueJobs.set({ queue: queue.name, state: s }, counts[s] ?? 0);
      // Pending work is what waits to be taken or is being worked on.
      if (!trackStalls) continue;
      const pending = (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.active ?? 0);
      const next = nextStall(this.state.get(queue.name), pending);
      this.state.set(queue.name, next);
      metrics.queueStalled.set({ queue: queue.name }, next.stalled ? 1 : 0);
      if (next.stalled) stalled.push(queue.name);
    }
    return stalled;
  }
}
