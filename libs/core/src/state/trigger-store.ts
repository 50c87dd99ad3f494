/**
 * Each tenant's triggers in Redis: one hash of records, bounded per tenant. The records are JSON
 * this store does not read (their schema, with the run request in it, is `triggers/trigger-model.ts`,
 * a layer above): it keeps them, counts them and hands them back.
 */
import type { RedisClient } from './redis-client.js';
import { triggersKey } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

export interface TriggerStoreOptions {
  readonly prefix: string;
  /** Most triggers one tenant may hold (`TETRALOOP_TRIGGERS_MAX`). */
  readonly maxPerTenant: number;
}

export class TriggerStore {
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    readonly options: TriggerStoreOptions,
  ) {
    this.script = loadScripts(redis);
  }

  private key(tenant: string): string {
    return triggersKey(this.options.prefix, tenant);
  }

  /** Adds a record; false when the tenant already holds its most. */
  async add(tenant: string, id: string, record: string): Promise<boolean> {
    return (
      (await this.script('add-capped-1', [this.key(tenant)], [id, record, this.options.maxPerTenant])) === 1
    );
  }

  /** Every record of the tenant (at most its cap). */
  list(tenant: string): Promise<string[]> {
    return this.redis.hvals(this.key(tenant));
  }

  get(tenant: string, id: string): Promise<string | null> {
    return this.redis.hget(this.key(tenant), id);
  }

  /** False when the tenant had no trigger of that id. */
  async delete(tenant: string, id: string): Promise<boolean> {
    return (await this.redis.hdel(this.key(tenant), id)) === 1;
  }
}
