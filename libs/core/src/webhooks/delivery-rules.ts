/**
 * The rules of outbound webhooks, pure: which targets want an event, the id of a delivery, the
 * request that is posted (body and headers), what an attempt's answer means (delivered, retried
 * after a delay, or given up), and what a settled run's event says.
 */
import { createHash } from 'node:crypto';
import type {
  DeliveryErrorClass,
  DeliveryOutcome,
  WebhookEvent,
  WebhookEventType,
} from '../domain/webhook.js';
import { retryDelay, type BackoffPolicy } from '../policy/retry-policy.js';
import { ResponseTooLargeError, undiciErrors } from '../tools/egress-client.js';
import { EgressDeniedError } from '../tools/egress-policy.js';
import { WEBHOOK_SIGNATURE_HEADER, signWebhook } from './signature.js';

export interface WebhookDeliverySettings {
  /** Attempts of one delivery, the first included. @defaultValue 8 */
  readonly attempts: number;
  /** Time to the receiver's headers, and between body chunks. @defaultValue 5000 */
  readonly timeoutMs: number;
  /** Delays between attempts: exponential, with jitter; a 429's `Retry-After` wins when longer. */
  readonly backoff: BackoffPolicy;
}

export const DEFAULT_WEBHOOK_DELIVERY: WebhookDeliverySettings = {
  attempts: 8,
  timeoutMs: 5000,
  backoff: { baseMs: 2000, minMs: 500, maxMs: 600_000, jitter: 0.2 },
};

/** Where a delivery goes: a tenant's subscription, or the run's own `webhook`. */
export type DeliveryTarget =
  { readonly kind: 'subscription'; readonly id: string } | { readonly kind: 'run' };

/**
 * A delivery's id (and its job's): the same for the same event of the same run to the same target,
 * so a step that enqueues it again (a retried finalize) adds nothing. `key` tells apart events of
 * one type in one run (a node, a wait).
 */
export function deliveryIdOf(
  runId: string,
  target: DeliveryTarget,
  type: WebhookEventType,
  key: string,
): string {
  const name = target.kind === 'run' ? 'run' : target.id;
  const digest = createHash('sha256').update(`${runId}\u0000${name}\u0000${type}\u0000${key}`).digest('hex');
  return `whd_${digest.slice(0, 32)}`;
}

/** The posted request: the exact body that is signed, and its headers. */
export function deliveryRequest(
  event: WebhookEvent,
  secret: string,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): { readonly body: string; readonly headers: Record<string, string> } {
  const body = JSON.stringify(event);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'tetraloop-webhooks',
      [WEBHOOK_SIGNATURE_HEADER]: signWebhook(secret, body, nowSeconds),
      'x-tetraloop-event': event.type,
      'x-tetraloop-delivery': event.id,
    },
  };
}

/** What came back from one attempt: a status, or a transport failure by class. */
export type AttemptReply =
  { readonly status: number; readonly retryAfterMs?: number } | { readonly error: DeliveryErrorClass };

export interface AttemptVerdict {
  readonly outcome: DeliveryOutcome;
  readonly status: number | null;
  readonly error: DeliveryErrorClass | null;
  /** For `retrying`: the delay before the next attempt. */
  readonly delayMs?: number;
}

/** Failures that may pass: the receiver is down, overloaded or slow, or the network is. */
const RETRIED: ReadonlySet<DeliveryErrorClass> = new Set(['server', 'rate_limited', 'timeout', 'network']);

/**
 * What one attempt's reply means. 2xx: delivered. 5xx, 429, a timeout or a network error: retried
 * after an exponential delay with jitter (a 429's `Retry-After` wins when longer), unless it was
 * attempt `attempts` (then exhausted). Any other status (4xx, 3xx: redirects are not followed),
 * an address the egress policy refuses and a body past the byte cap are final: asking again would
 * be answered the same.
 */
export function judgeAttempt(
  reply: AttemptReply,
  attempt: number,
  settings: WebhookDeliverySettings,
  random: () => number = Math.random,
): AttemptVerdict {
  const status = 'status' in reply ? reply.status : null;
  if (status !== null && status >= 200 && status < 300) return { outcome: 'delivered', status, error: null };
  const error: DeliveryErrorClass =
    'error' in reply
      ? reply.error
      : status === 429
        ? 'rate_limited'
        : status! >= 500
          ? 'server'
          : status! >= 300 && status! < 400
            ? 'redirect'
            : 'client';
  if (!RETRIED.has(error)) {
    const outcome = error === 'egress_denied' ? 'refused' : error === 'no_secret' ? 'no_secret' : 'rejected';
    return { outcome, status, error };
  }
  if (attempt >= settings.attempts) return { outcome: 'exhausted', status, error };
  const retryAfterMs = 'status' in reply ? reply.retryAfterMs : undefined;
  const delayMs = retryDelay(
    attempt,
    retryAfterMs === undefined ? {} : { retryAfterMs },
    settings.backoff,
    random,
  );
  return { outcome: 'retrying', status, error, delayMs };
}

/** The class of a failed request (thrown by the egress client), never its message. */
export function transportErrorClass(err: unknown): DeliveryErrorClass {
  if (err instanceof EgressDeniedError) return 'egress_denied';
  if (err instanceof ResponseTooLargeError) return 'response_too_large';
  const undici = undiciErrors();
  if (
    (undici &&
      (err instanceof undici.HeadersTimeoutError ||
        err instanceof undici.BodyTimeoutError ||
        err instanceof undici.ConnectTimeoutError)) ||
    (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
  )
    return 'timeout';
  return 'network';
}

/** A `run.finished` event's output is its sinks' outputs when their JSON is at most this long. */
export const EVENT_OUTPUT_MAX_BYTES = 8192;

/** What a settled run's `run.finished` event is made from. */
export interface FinishedRun {
  readonly runId: string;
  readonly agentId: string;
  /** The session key as the tenant named it (not its stored, tenant-scoped form). */
  readonly sessionKey: string | null;
  readonly status: string;
  readonly error: { readonly code: string; readonly message: string } | null;
  readonly usage: Record<string, number>;
  readonly createdAt: string;
  readonly finishedAt: string;
  readonly output: unknown;
}

/**
 * The data of `run.finished`: the outcome, the error's code and message, usage and times. The
 * output goes along when its JSON is at most EVENT_OUTPUT_MAX_BYTES (`outputOmitted` says when it
 * did not: read it from `GET /v1/runs/:id`), so a large output neither bloats the delivery job nor
 * the receiver's request.
 */
export function runFinishedData(run: FinishedRun): Record<string, unknown> {
  const output = run.output === undefined ? null : run.output;
  const fits = Buffer.byteLength(JSON.stringify(output), 'utf8') <= EVENT_OUTPUT_MAX_BYTES;
  return {
    runId: run.runId,
    agentId: run.agentId,
    sessionKey: run.sessionKey,
    status: run.status,
    error: run.error ? { code: run.error.code, message: run.error.message } : null,
    usage: run.usage,
    createdAt: run.createdAt,
    finishedAt: run.finishedAt,
    output: fits ? output : null,
    ...(fits ? {} : { outputOmitted: true }),
  };
}
