/**
 * Each tenant's outbound webhooks in Redis: its subscriptions (each with its own signing secret),
 * the signing secret of its runs' own `webhook`s, and the recent delivery attempts of each. Secrets
 * are encrypted with the secret cipher under `TETRALOOP_SECRET_KEY` (the tenant and a name of their
 * own as additional data, so one cannot pass for another or for a tenant's `{"$secret"}`), handed
 * out once when made, and read back only by the worker that signs a delivery.
 */
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import {
  DeliveryAttempt,
  WebhookEventType,
  WebhookSubscription,
  type WebhookSubscriptionRequest,
} from '../domain/webhook.js';
import { decryptSecret, encryptSecret } from '../secrets/secret-cipher.js';
import { newWebhookSecret } from '../webhooks/signature.js';
import { SubscriptionCache, type SubscriptionCacheOptions } from '../webhooks/subscription-cache.js';
import { channels, webhookDeliveriesKey, webhookKeys } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';
import { SECRETS_OFF_MESSAGE } from './secret-store.js';
import { slotMulti } from './slot-multi.js';

export interface WebhookStoreOptions {
  readonly prefix: string;
  /** The 32-byte key secrets are encrypted under; without it creating or signing is refused. */
  readonly key?: Buffer;
  /** Most subscriptions one tenant may hold. @defaultValue 20 */
  readonly maxPerTenant: number;
  /** Delivery attempts kept per subscription (and per run). @defaultValue 100 */
  readonly deliveriesKept: number;
  /** How long a delivery list outlives its last attempt. @defaultValue 604800 (7 days) */
  readonly deliveriesTtlSeconds: number;
  /**
   * The bounds of the process's copy of each tenant's subscriptions while it follows their changes
   * (`ttlMs` 0: no copy). @defaultValue DEFAULT_SUBSCRIPTION_CACHE
   */
  readonly cache?: SubscriptionCacheOptions;
}

export const WEBHOOK_ERROR_CODES = [
  /** No `TETRALOOP_SECRET_KEY` is configured: no secret can be kept. */
  'secrets_off',
  'too_many_webhooks',
  /** A run asks for a `webhook` while its tenant has no signing secret. */
  'webhook_secret_missing',
] as const;
export type WebhookErrorCode = (typeof WEBHOOK_ERROR_CODES)[number];

export class WebhookStoreError extends Error {
  constructor(
    readonly code: WebhookErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookStoreError';
  }
}

/** A subscription as stored: its record and its secret, encrypted. */
const StoredSubscription = WebhookSubscription.extend({ secret: z.string() });

/** The additional data a secret is encrypted with: its own, unlike any `{"$secret"}` name. */
const SIGNING_NAME = 'webhook:signing';
const subscriptionName = (id: string): string => `webhook:${id}`;

/** Where delivery attempts are listed: a subscription's, or a run's own webhook's. */
export type DeliveryList = { readonly subscription: string } | { readonly runId: string };

export class WebhookStore {
  private readonly script: ScriptRunner;
  private readonly channel: string;
  /** Each tenant's subscriptions as last read, while this process follows their changes. */
  private cache: SubscriptionCache | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: WebhookStoreOptions,
  ) {
    this.script = loadScripts(redis);
    this.channel = channels(options.prefix).webhooks;
  }

  /**
   * Keeps a copy of each tenant's subscriptions, dropped whenever any process changes them (they
   * publish on `subscriber`'s channel): announcing a run of a tenant without subscriptions then
   * reads nothing. While `subscriber` is disconnected a change could be missed, so every read goes
   * to Redis until it is back, and every copy is dropped then. For the life of the subscriber.
   * A copy's TTL of 0 keeps none: every announcement reads Redis, and there is nothing to follow.
   */
  async followChanges(subscriber: RedisClient): Promise<void> {
    if (this.options.cache?.ttlMs === 0) return;
    const cache = new SubscriptionCache(this.options.cache);
    const onMessage = (channel: string, tenant: string): void => {
      if (channel === this.channel) cache.drop(tenant);
    };
    const follow = (on: boolean) => (): void => {
      cache.dropAll();
      this.cache = on ? cache : undefined;
    };
    subscriber.on('message', onMessage);
    subscriber.on('close', follow(false));
    await subscriber.subscribe(this.channel);
    // After a reconnect ioredis sends the resubscription before it emits `ready` again; a change
    // published in between is seen once the copy lapses (`ttlMs`).
    subscriber.on('ready', follow(true));
    if (subscriber.status === 'ready') follow(true)();
  }

  /** Tells every process following the changes that `tenant`'s subscriptions changed. */
  private async changed(tenant: string): Promise<void> {
    this.cache?.drop(tenant);
    await this.redis.publish(this.channel, tenant);
  }

  private key(): Buffer {
    if (!this.options.key) throw new WebhookStoreError('secrets_off', SECRETS_OFF_MESSAGE);
    return this.options.key;
  }

  private keys(tenant: string) {
    return webhookKeys(this.options.prefix, tenant);
  }

  /** Adds a subscription; its secret is in the answer and nowhere else in clear. */
  async create(
    tenant: string,
    request: WebhookSubscriptionRequest,
    now = new Date(),
  ): Promise<{ subscription: WebhookSubscription; secret: string }> {
    const key = this.key();
    const subscription: WebhookSubscription = {
      id: `whk_${randomBytes(12).toString('hex')}`,
      url: request.url,
      events: request.events,
      createdAt: now.toISOString(),
    };
    const secret = newWebhookSecret();
    const stored = {
      ...subscription,
      secret: encryptSecret(key, tenant, subscriptionName(subscription.id), secret),
    } satisfies z.infer<typeof StoredSubscription>;
    const added = await this.script(
      'add-capped-1',
      [this.keys(tenant).subscriptions],
      [subscription.id, JSON.stringify(stored), this.options.maxPerTenant],
    );
    if (added !== 1) {
      throw new WebhookStoreError(
        'too_many_webhooks',
        `a tenant holds at most ${this.options.maxPerTenant} webhook subscriptions (TETRALOOP_WEBHOOK_SUBSCRIPTIONS_MAX); delete one first`,
      );
    }
    await this.changed(tenant);
    return { subscription, secret };
  }

  /** The tenant's subscriptions, oldest first; never a secret. */
  async list(tenant: string): Promise<WebhookSubscription[]> {
    const all = await this.redis.hvals(this.keys(tenant).subscriptions);
    return all
      .map((raw) => WebhookSubscription.parse(StoredSubscription.parse(JSON.parse(raw))))
      .sort((a, b) =>
        a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1,
      );
  }

  /** The tenant's subscriptions that want `type`. */
  async subscribersOf(tenant: string, type: WebhookEventType): Promise<WebhookSubscription[]> {
    const all = this.cache ? await this.cache.get(tenant, () => this.list(tenant)) : await this.list(tenant);
    return all.filter((s) => s.events.includes(type));
  }

  /** Whether the tenant has the subscription. */
  async exists(tenant: string, id: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys(tenant).subscriptions, id)) === 1;
  }

  /** A subscription with its secret decrypted, for signing; null once it is deleted. */
  async forDelivery(tenant: string, id: string): Promise<{ url: string; secret: string } | null> {
    const raw = await this.redis.hget(this.keys(tenant).subscriptions, id);
    if (raw === null) return null;
    const stored = StoredSubscription.parse(JSON.parse(raw));
    return {
      url: stored.url,
      secret: decryptSecret(this.key(), tenant, subscriptionName(id), stored.secret),
    };
  }

  /** Deletes a subscription and its delivery list; false when the tenant had none of that id. */
  async delete(tenant: string, id: string): Promise<boolean> {
    const [[, removed] = []] =
      (await slotMulti(this.redis)
        .hdel(this.keys(tenant).subscriptions, id)
        .del(webhookDeliveriesKey(this.options.prefix, tenant, { subscription: id }))
        .exec()) ?? [];
    if (removed === 1) await this.changed(tenant);
    return removed === 1;
  }

  /**
   * Makes a new signing secret for the tenant's runs' own `webhook`s, replacing the one before:
   * deliveries attempted from now on are signed with it. Answered here only.
   */
  async rotateSigningSecret(tenant: string): Promise<string> {
    const secret = newWebhookSecret();
    await this.redis.set(this.keys(tenant).signing, encryptSecret(this.key(), tenant, SIGNING_NAME, secret));
    return secret;
  }

  async hasSigningSecret(tenant: string): Promise<boolean> {
    return (await this.redis.exists(this.keys(tenant).signing)) === 1;
  }

  /** The tenant's signing secret, decrypted; null when it has none. */
  async signingSecret(tenant: string): Promise<string | null> {
    const stored = await this.redis.get(this.keys(tenant).signing);
    return stored === null ? null : decryptSecret(this.key(), tenant, SIGNING_NAME, stored);
  }

  /** Records one attempt first in its list, trimmed to the newest `deliveriesKept`, with the list's TTL. */
  async recordAttempt(tenant: string, list: DeliveryList, attempt: DeliveryAttempt): Promise<void> {
    const key = webhookDeliveriesKey(this.options.prefix, tenant, list);
    await slotMulti(this.redis)
      .lpush(key, JSON.stringify(DeliveryAttempt.parse(attempt)))
      .ltrim(key, 0, this.options.deliveriesKept - 1)
      .expire(key, this.options.deliveriesTtlSeconds)
      .exec();
  }

  /** The recent attempts of a list, newest first. */
  async deliveries(tenant: string, list: DeliveryList): Promise<DeliveryAttempt[]> {
    const raw = await this.redis.lrange(webhookDeliveriesKey(this.options.prefix, tenant, list), 0, -1);
    return raw.map((r) => DeliveryAttempt.parse(JSON.parse(r)));
  }
}
