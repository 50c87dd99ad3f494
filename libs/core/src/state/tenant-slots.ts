/**
 * Running slots per tenant in Redis: which of a tenant's runs hold one of its `maxConcurrentRuns`
 * slots and which wait for one (a slot set, `slot-sets.ts`). A run takes a slot when its root job
 * starts it and gives it back when it settles; a slot a dead process never gave back is found by
 * comparing the holders with their runs' status ({@link TenantSlots.reconcile}), so none leaks.
 */
import type { RedisClient } from './redis-client.js';
import { runKeys, tenantSlotKeys } from './keys.js';
import { SlotSets } from './slot-sets.js';
import { slotPipeline } from './slot-multi.js';

/** The slot sets outlive the longest run (a day) with room; every change renews them. */
const SLOTS_TTL_SECONDS = 2 * 86_400;

export class TenantSlots {
  private readonly sets: SlotSets;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.sets = new SlotSets(redis);
  }

  /** True when `runId` holds a slot of `tenant` (now or already); false: it is on the waiting list. */
  async acquire(tenant: string, runId: string, cap: number): Promise<boolean> {
    return (await this.sets.acquire(tenantSlotKeys(this.prefix, tenant), runId, cap, SLOTS_TTL_SECONDS)).held;
  }

  /**
   * Gives back `runId`'s slot (`runId` null: only looks) and answers the free slots and the
   * waiting runs to wake, oldest first, with `extra` more in case some are gone.
   */
  release(
    tenant: string,
    runId: string | null,
    cap: number,
    extra = 5,
  ): Promise<{ free: number; waiting: string[] }> {
    return this.sets.release(tenantSlotKeys(this.prefix, tenant), runId, cap, extra);
  }

  /** The runs holding a slot of `tenant`, oldest first. */
  async holders(tenant: string): Promise<string[]> {
    return (await this.sets.holders(tenantSlotKeys(this.prefix, tenant))).map(([runId]) => runId);
  }

  /** Takes runs off the waiting list (their root job is gone). */
  leaveWaiting(tenant: string, runIds: readonly string[]): Promise<void> {
    return this.sets.leaveWaiting(tenantSlotKeys(this.prefix, tenant), runIds);
  }

  /**
   * Frees the slots of holders whose run has settled or is gone (its process died before it gave
   * the slot back). Answers how many were freed.
   */
  async reconcile(tenant: string): Promise<number> {
    const keys = tenantSlotKeys(this.prefix, tenant);
    const holders = await this.sets.holders(keys);
    if (holders.length === 0) return 0;
    const pipeline = slotPipeline(this.redis);
    for (const [runId] of holders) pipeline.hmget(runKeys(this.prefix, runId).meta, 'status', 'finishedAt');
    const replies = (await pipeline.exec()) ?? [];
    const done = holders.filter((_, i) => {
      const [err, fields] = replies[i] ?? [null, null];
      if (err) return false;
      const [status, finishedAt] = fields as (string | null)[];
      return status === null || (finishedAt !== null && finishedAt !== undefined);
    });
    return this.sets.forget(keys, done);
  }
}
