/**
 * Deletes a tenant with all its data: its API keys, its runs (found through the tenant's run
 * index), and every key that carries the tenant, found by the patterns of the key registry
 * (`tenantKeyPatterns` in keys.ts) — sessions, memory and lessons, cached plans, blobs, secrets,
 * webhook subscriptions and their deliveries, rate buckets and running slots, daily cost totals,
 * the run index itself. The default tenant holds unscoped names and cannot be deleted this way.
 */
import { isCluster, mastersOf, type RedisClient } from './redis-client.js';
import { DEFAULT_TENANT, scopedName } from '../domain/tenant.js';
import type { ApiKeyStore } from './api-key-store.js';
import { busySessionsKey, channels, memoryAgentsKey, tenantKeyPatterns } from './keys.js';
import type { RunStore } from './runs/run-store.js';

export class DefaultTenantError extends Error {
  constructor() {
    super('the default tenant holds data made without a key and cannot be deleted');
    this.name = 'DefaultTenantError';
  }
}

export interface TenantPurgeDeps {
  readonly redis: RedisClient;
  readonly prefix: string;
  readonly store: RunStore;
  readonly keys: ApiKeyStore;
  /** More key patterns of the tenant's data (for stores added beside these). */
  readonly patterns?: (tenant: string) => readonly string[];
}

export interface TenantPurgeResult {
  readonly keys: number;
  readonly runs: number;
  /** Redis keys deleted, runs' keys included. */
  readonly deleted: number;
}

export async function purgeTenant(deps: TenantPurgeDeps, tenant: string): Promise<TenantPurgeResult> {
  if (tenant === DEFAULT_TENANT) throw new DefaultTenantError();
  const { redis, prefix, store } = deps;
  const keys = await deps.keys.revokeTenant(tenant);
  let deleted = 0;
  const runs = await store.tenantRuns(tenant);
  for (const runId of runs) deleted += await store.purge(runId);
  for (const pattern of [...tenantKeyPatterns(prefix, tenant), ...(deps.patterns?.(tenant) ?? [])]) {
    deleted += await unlinkMatching(redis, pattern);
  }
  // Sets that name the tenant's sessions and agents among everyone's.
  const scoped = scopedName(tenant, '');
  for (const set of [busySessionsKey(prefix), memoryAgentsKey(prefix)]) {
    const members = (await redis.smembers(set)).filter((m) => m.startsWith(scoped));
    if (members.length > 0) await redis.srem(set, ...members);
  }
  // Its webhook subscriptions went with its keys: every process drops its copy of them.
  await redis.publish(channels(prefix).webhooks, tenant);
  return { keys, runs: runs.length, deleted };
}

/** Unlinks the keys matching `pattern` on every master (each holds only its slots' keys). */
async function unlinkMatching(redis: RedisClient, pattern: string): Promise<number> {
  let deleted = 0;
  for (const master of mastersOf(redis)) {
    let cursor = '0';
    do {
      const [next, found] = await master.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      if (found.length === 0) continue;
      // On a cluster the keys found may be in many slots: an UNLINK each, sent together.
      deleted += isCluster(redis)
        ? (await Promise.all(found.map((key) => redis.unlink(key)))).reduce((a, b) => a + b, 0)
        : await redis.unlink(...found);
    } while (cursor !== '0');
  }
  return deleted;
}
