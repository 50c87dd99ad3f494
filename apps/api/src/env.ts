/** Configuration of the API process, parsed once at boot. */
import { BaseEnv, WebhookSources, jsonEnv, parseEnv } from '@tetraloop/core';
import { z } from 'zod';

export const ApiEnv = BaseEnv.extend({
  PORT: z.coerce.number().int().min(0).max(65_535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  /** Largest accepted request body, in bytes. */
  TETRALOOP_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(1024 * 1024),
  /** Token for Bull Board at /admin/queues (bearer, or basic auth password). Unset: the board is off. */
  TETRALOOP_ADMIN_TOKEN: z.string().min(16, 'use at least 16 characters').optional(),
  /** Bull Board shows queues but cannot retry, remove or promote jobs. */
  TETRALOOP_ADMIN_READ_ONLY: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  /** How often queue depths are read for /metrics and the stall alarm. */
  TETRALOOP_QUEUE_CHECK_MS: z.coerce.number().int().min(100).default(5000),
  /** On SIGTERM: how long open event streams and requests get to finish. */
  TETRALOOP_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),
  /** Signals a run accepts at most (`POST /v1/runs/:id/signals/:name`); more answer 429. */
  TETRALOOP_SIGNALS_MAX_PER_RUN: z.coerce.number().int().positive().default(100),
  /** Largest signal payload (its JSON, in bytes); larger answer 413. */
  TETRALOOP_SIGNAL_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(64 * 1024),
  /**
   * Webhook sources, as JSON: [{"name", "secret" (≥ 16 characters), "tenant"?, "sessions"?}]. Only
   * these names are accepted at `POST /v1/sources/:name/events`, each with a signed body.
   */
  TETRALOOP_WEBHOOKS: jsonEnv(WebhookSources, '[]'),
  /** How far a webhook signature's timestamp may be from now, and how long a signature is remembered. */
  TETRALOOP_WEBHOOK_TOLERANCE_SECONDS: z.coerce.number().int().min(1).max(3600).default(300),
  /** Longest `wait` a client may ask for. */
  TETRALOOP_MAX_WAIT_MS: z.coerce.number().int().positive().default(300_000),
});
export type ApiEnv = z.infer<typeof ApiEnv>;

export const parseApiEnv = (env: Record<string, string | undefined> = process.env): ApiEnv =>
  parseEnv(ApiEnv, env);
