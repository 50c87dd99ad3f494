/**
 * Each tenant's store items in Redis (the LangGraph Agent Protocol's `/store`: documents an agent
 * keeps across threads, by namespace and key): one hash per tenant, bounded by a count per tenant
 * (`TETRALOOP_STORE_ITEMS_MAX`); a value's size is bounded by the caller before it is put. Search
 * reads the whole hash, which the bound keeps small; the filtering is the caller's (pure).
 */
import type { RedisClient } from './redis-client.js';
import { storeItemsKey } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

export interface ItemStoreOptions {
  readonly prefix: string;
  /** Most items one tenant may hold (`TETRALOOP_STORE_ITEMS_MAX`). */
  readonly maxPerTenant: number;
}

/** One item as stored: where it is, what it holds, and when it was written (snake_case, as the protocol shows them). */
export interface StoredItem {
  readonly namespace: string[];
  readonly key: string;
  readonly value: Record<string, unknown>;
  readonly created_at: string;
  readonly updated_at: string;
}

export type PutOutcome = 'created' | 'replaced' | 'full';

/** The hash field of an item: its namespace and key, unambiguous whatever characters they hold. */
const fieldOf = (namespace: readonly string[], key: string): string => JSON.stringify([namespace, key]);

function itemOf(field: string, record: string): StoredItem {
  const [namespace, key] = JSON.parse(field) as [string[], string];
  const { created_at, updated_at, value } = JSON.parse(record) as Omit<StoredItem, 'namespace' | 'key'>;
  return { namespace, key, value, created_at, updated_at };
}

export class ItemStore {
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    readonly options: ItemStoreOptions,
  ) {
    this.script = loadScripts(redis);
  }

  private key(tenant: string): string {
    return storeItemsKey(this.options.prefix, tenant);
  }

  /** Puts an item (replacing one with its namespace and key); `full` when a new one would pass the cap. */
  async put(
    tenant: string,
    namespace: readonly string[],
    key: string,
    value: Record<string, unknown>,
  ): Promise<PutOutcome> {
    const outcome = await this.script(
      'put-item-1',
      [this.key(tenant)],
      [fieldOf(namespace, key), JSON.stringify(value), new Date().toISOString(), this.options.maxPerTenant],
    );
    return outcome === 1 ? 'created' : outcome === 0 ? 'replaced' : 'full';
  }

  async get(tenant: string, namespace: readonly string[], key: string): Promise<StoredItem | null> {
    const record = await this.redis.hget(this.key(tenant), fieldOf(namespace, key));
    return record === null ? null : itemOf(fieldOf(namespace, key), record);
  }

  /** False when there was no such item. */
  async delete(tenant: string, namespace: readonly string[], key: string): Promise<boolean> {
    return (await this.redis.hdel(this.key(tenant), fieldOf(namespace, key))) === 1;
  }

  /** Every item of the tenant (at most its cap), in no particular order. */
  async all(tenant: string): Promise<StoredItem[]> {
    const records = await this.redis.hgetall(this.key(tenant));
    return Object.entries(records).map(([field, record]) => itemOf(field, record));
  }
}
