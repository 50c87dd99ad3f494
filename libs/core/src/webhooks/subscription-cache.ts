/**
 * A process's copy of each tenant's webhook subscriptions, so announcing a run that nobody
 * subscribed to reads nothing from Redis. Every change of a tenant's subscriptions is published
 * (`channels().webhooks`) and drops the tenant's copy in every process that follows the channel;
 * a copy also lapses after `ttlMs`, so a change published while a process was not listening (its
 * subscriber reconnecting) is seen within that time at worst, and a reconnect drops every copy.
 * The deployment sets both bounds (`TETRALOOP_WEBHOOK_CACHE_TTL_MS`, whose 0 keeps no copy at all:
 * see `WebhookStore.followChanges`, and `TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS`).
 * Pure: the caller reads and subscribes.
 */
import type { WebhookSubscription } from '../domain/webhook.js';

export interface SubscriptionCacheOptions {
  /** How long a copy is used before it is read again. @defaultValue 60000 */
  readonly ttlMs?: number;
  /** Tenants whose copies are kept; the least recently read go first. @defaultValue 10000 */
  readonly maxTenants?: number;
}

/** The copies' bounds when the deployment sets none. */
export const DEFAULT_SUBSCRIPTION_CACHE = { ttlMs: 60_000, maxTenants: 10_000 } as const;

interface Copy {
  readonly subscriptions: readonly WebhookSubscription[];
  readonly readAt: number;
}

export class SubscriptionCache {
  private readonly copies = new Map<string, Copy>();
  /**
   * Bumped when a tenant's copy is dropped: a read that began before the drop must not store what
   * it read, which may predate the change.
   */
  private readonly drops = new Map<string, number>();
  private everything = 0;
  private readonly ttlMs: number;
  private readonly maxTenants: number;

  constructor(options: SubscriptionCacheOptions = {}) {
    this.ttlMs = options.ttlMs ?? DEFAULT_SUBSCRIPTION_CACHE.ttlMs;
    this.maxTenants = options.maxTenants ?? DEFAULT_SUBSCRIPTION_CACHE.maxTenants;
  }

  /** The tenant's subscriptions from the copy, or from `read` (kept as the copy unless dropped meanwhile). */
  async get(
    tenant: string,
    read: () => Promise<WebhookSubscription[]>,
    now: () => number = Date.now,
  ): Promise<readonly WebhookSubscription[]> {
    const copy = this.copies.get(tenant);
    if (copy && now() - copy.readAt < this.ttlMs) {
      // Read again: the most recently used tenants stay.
      this.copies.delete(tenant);
      this.copies.set(tenant, copy);
      return copy.subscriptions;
    }
    const mark = this.markOf(tenant);
    const readAt = now();
    const subscriptions = await read();
    if (this.markOf(tenant) === mark) {
      this.copies.delete(tenant);
      this.copies.set(tenant, { subscriptions, readAt });
      for (const oldest of this.copies.keys()) {
        if (this.copies.size <= this.maxTenants) break;
        this.copies.delete(oldest);
      }
    }
    return subscriptions;
  }

  /** A tenant's subscriptions changed. */
  drop(tenant: string): void {
    this.copies.delete(tenant);
    this.drops.set(tenant, (this.drops.get(tenant) ?? 0) + 1);
    // Only reads in flight look at a tenant's count: it never needs to outgrow the copies.
    if (this.drops.size > this.maxTenants) this.dropAll();
  }

  /** Anything may have changed (the channel was not followed for a while). */
  dropAll(): void {
    this.copies.clear();
    this.drops.clear();
    this.everything++;
  }

  private markOf(tenant: string): string {
    return `${this.everything}:${this.drops.get(tenant) ?? 0}`;
  }
}
