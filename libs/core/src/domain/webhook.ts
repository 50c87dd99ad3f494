/**
 * Outbound webhooks as every layer sees them: the events Tetraloop posts, where a run or a tenant
 * asks for them (a run's `webhook`, a tenant's subscriptions), the body that is posted and the
 * record of each delivery attempt. Types, schemas and ids only; the rules are in `webhooks/`.
 */
import { z } from 'zod';

/**
 * The events a webhook may ask for: a run settled (`run.finished`); a node began waiting for a
 * signal, an approval or a budget decision (`run.waiting`); a node failed for good (`node.failed`,
 * also for a node whose failure the run continues past).
 */
export const WEBHOOK_EVENT_TYPES = ['run.finished', 'run.waiting', 'node.failed'] as const;
export const WebhookEventType = z.enum(WEBHOOK_EVENT_TYPES);
export type WebhookEventType = z.infer<typeof WebhookEventType>;

/** Longest webhook URL, in characters. */
export const MAX_WEBHOOK_URL_CHARS = 2048;

/** Where events are posted: an absolute http(s) URL without credentials in it. */
export const WebhookUrl = z
  .string()
  .max(MAX_WEBHOOK_URL_CHARS)
  .refine((value) => {
    if (!URL.canParse(value)) return false;
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password;
  }, 'must be an absolute http(s) URL without user or password');

/** The events asked for: at least one, each once. */
const WebhookEvents = z
  .array(WebhookEventType)
  .min(1)
  .max(WEBHOOK_EVENT_TYPES.length)
  .refine((events) => new Set(events).size === events.length, 'name each event once')
  .default(['run.finished']);

/**
 * A run's `webhook`: the run's events go to `url`, signed with its tenant's signing secret
 * (`POST /v1/webhooks/secret`). @defaultValue events ["run.finished"]
 */
export const RunWebhook = z.strictObject({ url: WebhookUrl, events: WebhookEvents });
export type RunWebhook = z.infer<typeof RunWebhook>;

/** Body of `POST /v1/webhooks`: a subscription to the events of every run of the tenant. */
export const WebhookSubscriptionRequest = RunWebhook;
export type WebhookSubscriptionRequest = z.infer<typeof WebhookSubscriptionRequest>;

/** A subscription's id: `whk_` and 24 hex digits. */
export const WebhookId = z.string().regex(/^whk_[0-9a-f]{24}$/, 'a webhook id is whk_ and 24 hex digits');

/** A tenant's subscription as it is listed: never its secret. */
export const WebhookSubscription = z.object({
  id: WebhookId,
  url: z.string(),
  events: z.array(WebhookEventType),
  createdAt: z.string(),
});
export type WebhookSubscription = z.infer<typeof WebhookSubscription>;

/** What is posted: `id` names the delivery and is the same on every attempt of it. */
export const WebhookEvent = z.object({
  id: z.string(),
  type: WebhookEventType,
  createdAt: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export type WebhookEvent = z.infer<typeof WebhookEvent>;

/**
 * How one attempt ended: `delivered` (2xx), `retrying` (5xx, 429, a network error or timeout, with
 * attempts left), `exhausted` (the same on the last attempt), `rejected` (another 4xx or a 3xx:
 * not retried), `refused` (the egress policy refused the address), `no_secret` (the signing
 * secret is gone: the subscription was deleted, or the tenant has no signing secret).
 */
export const DELIVERY_OUTCOMES = [
  'delivered',
  'retrying',
  'exhausted',
  'rejected',
  'refused',
  'no_secret',
] as const;
export const DeliveryOutcome = z.enum(DELIVERY_OUTCOMES);
export type DeliveryOutcome = z.infer<typeof DeliveryOutcome>;

/** What went wrong in an attempt that got no 2xx, by class (never an address or a body). */
export const DELIVERY_ERROR_CLASSES = [
  'server',
  'rate_limited',
  'client',
  'redirect',
  'timeout',
  'network',
  'egress_denied',
  'response_too_large',
  'no_secret',
] as const;
export const DeliveryErrorClass = z.enum(DELIVERY_ERROR_CLASSES);
export type DeliveryErrorClass = z.infer<typeof DeliveryErrorClass>;

/** One delivery attempt, as recorded. */
export const DeliveryAttempt = z.object({
  /** The delivery (the posted event's `id`). */
  deliveryId: z.string(),
  type: WebhookEventType,
  runId: z.string(),
  /** 1 for the first attempt of the delivery. */
  attempt: z.number().int().positive(),
  /** When the attempt started (ISO). */
  at: z.string(),
  durationMs: z.number().int().nonnegative(),
  outcome: DeliveryOutcome,
  /** The receiver's HTTP status; null when none came. */
  status: z.number().int().nullable(),
  error: DeliveryErrorClass.nullable(),
  /** When the next attempt is due (ISO), for `retrying`. */
  retryAt: z.string().optional(),
});
export type DeliveryAttempt = z.infer<typeof DeliveryAttempt>;

/** A run's `webhook` in its document: where its events go, and its recent delivery attempts. */
export const RunWebhookView = z.object({
  url: z.string(),
  events: z.array(WebhookEventType),
  /** Newest first, at most the deployment's `TETRALOOP_WEBHOOK_DELIVERIES_KEPT`. */
  deliveries: z.array(DeliveryAttempt),
});
export type RunWebhookView = z.infer<typeof RunWebhookView>;
