/**
 * The plan cache in Redis: per agent, a validated first plan under the hash of everything the
 * planner's answer depends on (`planning/cached-plan.ts` computes it), kept for a TTL. A cached
 * graph is only a candidate: the plan loop validates it again before a run uses it. Not to be
 * confused with `executor/plan-cache.ts`, each worker's in-process cache of compiled run plans.
 */
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import { planCacheKey } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

/** One cache entry: the graph as the planner answered it, when, and the run it was planned for. */
export const CachedPlan = z.object({
  graph: z.unknown(),
  createdAt: z.string(),
  runId: z.string(),
});
export type CachedPlan = z.infer<typeof CachedPlan>;

export interface PlanCacheOptions {
  readonly prefix: string;
  /** `false` (TETRALOOP_PLAN_CACHE=off): nothing is read or stored; entries are still removed. */
  readonly enabled: boolean;
  /** How long an entry is kept. @defaultValue 3600 */
  readonly ttlSeconds: number;
}

export class PlanCacheStore {
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    readonly options: PlanCacheOptions,
  ) {
    this.script = loadScripts(redis);
  }

  get enabled(): boolean {
    return this.options.enabled;
  }

  /** The Redis key of `agentId`'s entry under `hash`. */
  keyOf(agentId: string, hash: string): string {
    return planCacheKey(this.options.prefix, agentId, hash);
  }

  /** The entry under `key`; `corrupt` when something unreadable is stored there. */
  async get(key: string): Promise<CachedPlan | 'corrupt' | null> {
    const raw = await this.redis.get(key);
    if (raw === null) return null;
    try {
      const parsed = CachedPlan.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : 'corrupt';
    } catch {
      return 'corrupt';
    }
  }

  /** Stores (or replaces) the entry under `key`, for the configured TTL. */
  async put(key: string, entry: CachedPlan): Promise<void> {
    await this.redis.set(key, JSON.stringify(entry), 'EX', this.options.ttlSeconds);
  }

  /**
   * Removes the entry under `key` if it still names `runId` (the run it was planned for); any
   * entry there when `runId` is not given. True when something was removed.
   */
  async forget(key: string, runId?: string): Promise<boolean> {
    return (await this.script('forget-cached-plan-1', [key], [runId ?? ''])) === 1;
  }
}
