/** Configuration of the API process, parsed once at boot. */
import {
  ACCEPT_WAITAOF_MODES,
  BaseEnv,
  ConfigError,
  WebhookSources,
  jsonEnv,
  parseEnv,
  type AcceptDurability,
} from '@tetraloop/core';
import { z } from 'zod';
import { DEFAULT_JSON_MAX_DEPTH } from './json-depth.js';
import { DEFAULT_MAX_WAIT_MS } from './requests.js';
import { parseTrustProxy } from './trust-proxy.js';

export const ApiEnv = BaseEnv.extend({
  PORT: z.coerce.number().int().min(0).max(65_535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  /** Largest accepted request body, in bytes. */
  TETRALOOP_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(1024 * 1024),
  /** Deepest nesting of arrays and objects a JSON body may have; deeper answers `400 json_too_deep`. */
  TETRALOOP_JSON_MAX_DEPTH: z.coerce.number().int().min(8).max(10_000).default(DEFAULT_JSON_MAX_DEPTH),
  /**
   * `required`: every /v1 request needs an API key (or the root token); `off`: anyone may do
   * anything, in the default tenant — only on loopback unless TETRALOOP_AUTH_OFF_I_UNDERSTAND=1.
   */
  TETRALOOP_AUTH: z.enum(['required', 'off']).default('required'),
  /** Allows TETRALOOP_AUTH=off on an address other than loopback. */
  TETRALOOP_AUTH_OFF_I_UNDERSTAND: z.enum(['1']).optional(),
  /** The operator's root token: manages keys and tenants, opens Bull Board. Unset: neither. */
  TETRALOOP_ADMIN_TOKEN: z.string().min(32, 'use at least 32 characters').optional(),
  /** Bull Board shows queues but cannot retry, remove or promote jobs. */
  TETRALOOP_ADMIN_READ_ONLY: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  /**
   * Express's `trust proxy`: whose `X-Forwarded-*` headers are believed. `false` (none), `true`,
   * a hop count, or comma-separated addresses, subnets, `loopback`, `linklocal`, `uniquelocal`.
   * Behind a TLS proxy, name it: a request that came over HTTPS then gets a `Secure` login cookie.
   */
  TETRALOOP_TRUST_PROXY: z
    .string()
    .default('false')
    .transform((text, ctx) => {
      try {
        return parseTrustProxy(text);
      } catch (err) {
        ctx.issues.push({
          code: 'custom',
          input: text,
          message: `${(err as Error).message}: use true, false, a hop count, or comma-separated addresses, subnets, loopback, linklocal, uniquelocal`,
        });
        return z.NEVER;
      }
    }),
  /** A bearer token /metrics asks for; open when unset. */
  TETRALOOP_METRICS_TOKEN: z.string().min(16, 'use at least 16 characters').optional(),
  /** API keys one tenant may hold. */
  TETRALOOP_KEYS_MAX_PER_TENANT: z.coerce.number().int().min(1).max(100_000).default(100),
  /**
   * How long an API process reuses an API key it verified before reading Redis again (0: every
   * request reads it). A key revoked through another API process is refused here within this time.
   */
  TETRALOOP_KEY_CACHE_MS: z.coerce.number().int().min(0).max(5000).default(2000),
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
  TETRALOOP_MAX_WAIT_MS: z.coerce.number().int().positive().default(DEFAULT_MAX_WAIT_MS),
  /** How long a session message's POST waits for the sense loop to place it before answering `queued` without a run id. */
  TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS: z.coerce.number().int().min(0).max(60_000).default(5000),
  /** Event streams (`GET /v1/runs/:id/events`) this process holds open at once; more answer 503. */
  TETRALOOP_MAX_STREAMS: z.coerce.number().int().min(1).default(1000),
  /** Event streams one tenant holds open at once in this process; more answer 429. */
  TETRALOOP_MAX_STREAMS_PER_TENANT: z.coerce.number().int().min(1).default(100),
  /** Waits (`GET /v1/runs/:id/wait` on a run still going) this process holds at once; more answer 503. */
  TETRALOOP_MAX_WAITS: z.coerce.number().int().min(1).default(10_000),
  /** Waits one tenant holds at once in this process; more answer 429. */
  TETRALOOP_MAX_WAITS_PER_TENANT: z.coerce.number().int().min(1).default(1000),
  /** Blocking connections that read the event streams of every open stream of the process. */
  TETRALOOP_EVENT_READERS: z.coerce.number().int().min(1).max(64).default(2),
  /** Most run streams one blocking read names; a reader following more reads them in turns. */
  TETRALOOP_EVENT_READ_KEYS: z.coerce.number().int().min(1).max(10_000).default(500),
  /**
   * Replicas that must acknowledge an accepted run's writes (`WAIT`) before `POST /v1/runs` answers
   * `202`; fewer within TETRALOOP_ACCEPT_WAIT_MS answer `503 not_replicated`. 0: not waited for.
   */
  TETRALOOP_ACCEPT_WAIT_REPLICAS: z.coerce.number().int().min(0).max(64).default(0),
  /**
   * `local`: `POST /v1/runs` waits until Redis fsynced the run to its AOF (`WAITAOF 1 0`, Redis 7.2
   * and later, AOF on; the API refuses to start otherwise); not within TETRALOOP_ACCEPT_WAIT_MS:
   * `503 not_persisted`. `off`: not waited for.
   */
  TETRALOOP_ACCEPT_WAITAOF: z.enum(ACCEPT_WAITAOF_MODES).default('off'),
  /** The longest each of those waits may take. */
  TETRALOOP_ACCEPT_WAIT_MS: z.coerce.number().int().min(1).max(60_000).default(1000),
});
export type ApiEnv = z.infer<typeof ApiEnv>;

/** What `POST /v1/runs` waits for before it answers. */
export function acceptDurabilityOf(env: ApiEnv): AcceptDurability {
  return {
    replicas: env.TETRALOOP_ACCEPT_WAIT_REPLICAS,
    waitAof: env.TETRALOOP_ACCEPT_WAITAOF,
    waitMs: env.TETRALOOP_ACCEPT_WAIT_MS,
  };
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Auth off is never open by accident: off the loopback it must be asked for twice. */
export function checkAuthExposure(env: ApiEnv): void {
  if (env.TETRALOOP_AUTH === 'off' && !LOOPBACK.has(env.HOST) && !env.TETRALOOP_AUTH_OFF_I_UNDERSTAND) {
    throw new ConfigError(
      new z.ZodError([
        {
          code: 'custom',
          path: ['TETRALOOP_AUTH'],
          message: `off with HOST=${env.HOST} lets anyone who reaches it do anything: bind HOST=127.0.0.1, set TETRALOOP_AUTH=required, or set TETRALOOP_AUTH_OFF_I_UNDERSTAND=1`,
          input: env.TETRALOOP_AUTH,
        },
      ]),
    );
  }
}

export function parseApiEnv(env: Record<string, string | undefined> = process.env): ApiEnv {
  const parsed = parseEnv(ApiEnv, env);
  checkAuthExposure(parsed);
  return parsed;
}
