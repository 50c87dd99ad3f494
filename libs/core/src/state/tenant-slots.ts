/**
 * Running slots per tenant in Redis: which of a tenant's runs hold one of its `maxConcurrentRuns`
 * slots (a sorted set of run ids by the time they got it) and which wait for one (another, oldest
 * first). A run takes a slot when its root job starts it and gives it back when it settles; a slot
 * a dead process never gave back is found by comparing the holders with their runs' status
 * ({@link TenantSlots.reconcile}), so none leaks. Each change is one script (`lua-limits/`).
 */
import type { RedisClient } from './redis-client.js';
import { runKeys, tenantSlotKeys } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';
import { slotPipeline } from './slot-multi.js';

/** The slot sets outlive the longest run (a day) with room; every change renews them. */
const SLOTS_TTL_SECONDS = 2 * 86_400;

export class TenantSlots {
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.script = loadScripts(redis);
  }

  private keys(tenant: string): string[] {
    const k = tenantSlotKeys(this.prefix, tenant);
    return [k.running, k.waiting];
  }

  /** True when `runId` holds a slot of `tenant` (now or already); false: it is on the waiting list. */
  async acquire(tenant: string, runId: string, cap: number): Promise<boolean> {
    const held = await this.script('acquire-slot-2', this.keys(tenant), [
      runId,
      cap,
      Date.now(),
      SLOTS_TTL_SECONDS,
    ]);
    return held === 1;
  }

  /**
   * Gives back `runId`'s slot (`runId` null: only looks) and answers the free slots and the
   * waiting runs to wake, oldest first, with `extra` more in case some are gone.
   */
  async release(
    tenant: string,
    runId: string | null,
    cap: number,
    extra = 5,
  ): Promise<{ free: number; waiting: string[] }> {
    const [free, waiting] = (await this.script('release-slot-2', this.keys(tenant), [
      runId ?? '',
      cap,
      extra,
    ])) as [number, string[]];
    return { free, waiting };
  }

  /** The runs holding a slot of `tenant`, oldest first. */
  async holders(tenant: string): Promise<string[]> {
    return this.redis.zrange(tenantSlotKeys(this.prefix, tenant).running, '0', '-1');
  }

  /** Takes runs off the waiting list (their root job is gone). */
  async leaveWaiting(tenant: string, runIds: readonly string[]): Promise<void> {
    if (runIds.length > 0) await this.redis.zrem(tenantSlotKeys(this.prefix, tenant).waiting, ...runIds);
  }

  /**
   * Frees the slots of holders whose run has settled or is gone (its process died before it gave
   * the slot back). Answers how many were freed.
   */
  async reconcile(tenant: string): Promise<number> {
    const k = tenantSlotKeys(this.prefix, tenant);
    const flat = await this.redis.zrange(k.running, '0', '-1', 'WITHSCORES');
    const holders: [string, string][] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) holders.push([flat[i]!, flat[i + 1]!]);
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
    if (done.length === 0) return 0;
    return (await this.script('forget-slots-2', this.keys(tenant), done.flat())) as number;
  }
}
