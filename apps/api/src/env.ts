/** Configuration of the API process, parsed once at boot. */
import {
  BASE_SETTINGS,
  SHUTDOWN_GRACE_DEFAULT_MS,
  envSchema,
  setting,
  type Settings,
  ConfigError,
  jsonEnv,
  parseEnv,
} from '@tetraloop/core/config';
import { ACCEPT_WAITAOF_MODES, type AcceptDurability } from '@tetraloop/core/durability';
import type { RunEventHubOptions } from '@tetraloop/core/runs';
import { WebhookSources } from '@tetraloop/core/sessions';
import type { ApiKeyStoreOptions } from '@tetraloop/core/state';
import { z } from 'zod';
import type { AppDeps } from './app.js';
import { DEFAULT_JSON_MAX_DEPTH } from './json-depth.js';
import { DEFAULT_MAX_WAIT_MS } from './max-wait.js';
import type { LongRequestLimits } from './long-requests.js';
import { parseTrustProxy } from './trust-proxy.js';

export const API_SETTINGS = {
  PORT: setting({
    group: 'api',
    file: 'api.port',
    readBy: ['api'],
    doc: 'The port the API listens on (0: any free port).',
    schema: z.coerce.number().int().min(0).max(65_535).default(3000),
  }),
  HOST: setting({
    group: 'api',
    file: 'api.host',
    readBy: ['api'],
    doc: 'The address the API binds (`tetraloop dev`: `127.0.0.1`). Auth off is refused off the loopback unless `TETRALOOP_AUTH_OFF_I_UNDERSTAND=1`.',
    schema: z.string().default('0.0.0.0'),
  }),
  TETRALOOP_STORE_ITEMS_MAX: setting({
    group: 'api',
    file: 'api.storeItemsMax',
    readBy: ['api'],
    doc: 'Most items one tenant may keep in the LangGraph store (`/langgraph/store/items`); a new item past it is refused `409 store_full`.',
    schema: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  }),
  TETRALOOP_STORE_VALUE_MAX_BYTES: setting({
    group: 'api',
    file: 'api.storeValueMaxBytes',
    readBy: ['api'],
    doc: 'Largest value of one LangGraph store item, as JSON in UTF-8 bytes; a larger one is refused `413 value_too_large`.',
    schema: z.coerce.number().int().min(1).max(1_048_576).default(65_536),
  }),
  TETRALOOP_BODY_LIMIT_BYTES: setting({
    group: 'api',
    file: 'api.bodyLimitBytes',
    readBy: ['api'],
    doc: 'Largest accepted request body, in bytes.',
    schema: z.coerce
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
  }),
  TETRALOOP_JSON_MAX_DEPTH: setting({
    group: 'api',
    file: 'api.jsonMaxDepth',
    readBy: ['api'],
    doc: 'Deepest nesting of arrays and objects a JSON body may have; deeper answers `400 json_too_deep`.',
    schema: z.coerce.number().int().min(8).max(10_000).default(DEFAULT_JSON_MAX_DEPTH),
  }),
  TETRALOOP_AUTH: setting({
    group: 'auth',
    file: 'auth.mode',
    readBy: ['api'],
    doc: '`required`: every /v1 request needs an API key (or the root token); `off`: anyone may do anything, in the default tenant — only on loopback unless TETRALOOP_AUTH_OFF_I_UNDERSTAND=1.',
    schema: z.enum(['required', 'off']).default('required'),
  }),
  TETRALOOP_AUTH_OFF_I_UNDERSTAND: setting({
    group: 'auth',
    file: 'auth.offIUnderstand',
    readBy: ['api'],
    doc: 'Allows TETRALOOP_AUTH=off on an address other than loopback.',
    schema: z.enum(['1']).optional(),
  }),
  TETRALOOP_ADMIN_TOKEN: setting({
    group: 'auth',
    file: 'auth.adminToken',
    readBy: ['api'],
    secret: true,
    doc: "The operator's root token: manages keys and tenants, opens Bull Board. Unset: neither.",
    schema: z.string().min(32, 'use at least 32 characters').optional(),
  }),
  TETRALOOP_ADMIN_READ_ONLY: setting({
    group: 'auth',
    file: 'auth.adminReadOnly',
    readBy: ['api'],
    doc: 'Bull Board shows queues but cannot retry, remove or promote jobs.',
    schema: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true'),
  }),
  TETRALOOP_TRUST_PROXY: setting({
    group: 'api',
    file: 'api.trustProxy',
    readBy: ['api'],
    form: 'list',
    doc: "Express's `trust proxy`: whose `X-Forwarded-*` headers are believed. `false` (none), `true`, a hop count, or comma-separated addresses, subnets, `loopback`, `linklocal`, `uniquelocal`. Behind a TLS proxy, name it: a request that came over HTTPS then gets a `Secure` login cookie.",
    schema: z
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
  }),
  TETRALOOP_METRICS_TOKEN: setting({
    group: 'auth',
    file: 'auth.metricsToken',
    readBy: ['api'],
    secret: true,
    doc: 'A bearer token /metrics asks for; open when unset.',
    schema: z.string().min(16, 'use at least 16 characters').optional(),
  }),
  TETRALOOP_KEYS_MAX_PER_TENANT: setting({
    group: 'auth',
    file: 'auth.keysMaxPerTenant',
    readBy: ['api'],
    doc: 'API keys one tenant may hold.',
    schema: z.coerce.number().int().min(1).max(100_000).default(100),
  }),
  TETRALOOP_KEY_CACHE_MS: setting({
    group: 'auth',
    file: 'auth.keyCacheMs',
    readBy: ['api'],
    doc: 'How long an API process reuses an API key it verified before reading Redis again (0: every request reads it). A key revoked through another API process is refused here within this time.',
    schema: z.coerce.number().int().min(0).max(5000).default(2000),
  }),
  TETRALOOP_SIGNALS_MAX_PER_RUN: setting({
    group: 'api',
    file: 'api.signalsMaxPerRun',
    readBy: ['api'],
    doc: 'Signals a run accepts at most (`POST /v1/runs/:id/signals/:name`); more answer 429.',
    schema: z.coerce.number().int().positive().default(100),
  }),
  TETRALOOP_SIGNAL_MAX_BYTES: setting({
    group: 'api',
    file: 'api.signalMaxBytes',
    readBy: ['api'],
    doc: 'Largest signal payload (its JSON, in bytes); larger answer 413.',
    schema: z.coerce
      .number()
      .int()
      .positive()
      .default(64 * 1024),
  }),
  TETRALOOP_WEBHOOKS: setting({
    group: 'sources',
    file: 'webhooks',
    readBy: ['api'],
    form: 'json',
    secret: true,
    doc: 'Webhook sources, as JSON: [{"name", "secret" (≥ 16 characters), "tenant"?, "sessions"?}]. Only these names are accepted at `POST /v1/sources/:name/events`, each with a signed body.',
    schema: jsonEnv(WebhookSources, '[]'),
  }),
  TETRALOOP_WEBHOOK_TOLERANCE_SECONDS: setting({
    group: 'sources',
    file: 'sense.webhookToleranceSeconds',
    readBy: ['api'],
    doc: "How far a webhook signature's timestamp may be from now, and how long a signature is remembered.",
    schema: z.coerce.number().int().min(1).max(3600).default(300),
  }),
  TETRALOOP_MAX_WAIT_MS: setting({
    group: 'api',
    file: 'api.maxWaitMs',
    readBy: ['api'],
    doc: 'Longest `wait` a client may ask for.',
    schema: z.coerce.number().int().positive().default(DEFAULT_MAX_WAIT_MS),
  }),
  TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS: setting({
    group: 'api',
    file: 'api.messagePlaceTimeoutMs',
    readBy: ['api'],
    doc: "How long a session message's POST waits for the sense loop to place it before answering `queued` without a run id.",
    schema: z.coerce.number().int().min(0).max(60_000).default(5000),
  }),
  TETRALOOP_MAX_STREAMS: setting({
    group: 'api',
    file: 'api.maxStreams',
    readBy: ['api'],
    doc: 'Event streams (`GET /v1/runs/:id/events`) this process holds open at once; more answer 503.',
    schema: z.coerce.number().int().min(1).default(1000),
  }),
  TETRALOOP_MAX_STREAMS_PER_TENANT: setting({
    group: 'api',
    file: 'api.maxStreamsPerTenant',
    readBy: ['api'],
    doc: 'Event streams one tenant holds open at once in this process; more answer 429.',
    schema: z.coerce.number().int().min(1).default(100),
  }),
  TETRALOOP_MAX_WAITS: setting({
    group: 'api',
    file: 'api.maxWaits',
    readBy: ['api'],
    doc: 'Waits (`GET /v1/runs/:id/wait` on a run still going) this process holds at once; more answer 503.',
    schema: z.coerce.number().int().min(1).default(10_000),
  }),
  TETRALOOP_MAX_WAITS_PER_TENANT: setting({
    group: 'api',
    file: 'api.maxWaitsPerTenant',
    readBy: ['api'],
    doc: 'Waits one tenant holds at once in this process; more answer 429.',
    schema: z.coerce.number().int().min(1).default(1000),
  }),
  TETRALOOP_EVENT_READERS: setting({
    group: 'api',
    file: 'api.eventReaders',
    readBy: ['api'],
    doc: 'Blocking connections that read the event streams of every open stream of the process.',
    schema: z.coerce.number().int().min(1).max(64).default(2),
  }),
  TETRALOOP_EVENT_READ_KEYS: setting({
    group: 'api',
    file: 'api.eventReadKeys',
    readBy: ['api'],
    doc: 'Most run streams one blocking read names; a reader following more reads them in turns.',
    schema: z.coerce.number().int().min(1).max(10_000).default(500),
  }),
  TETRALOOP_ACCEPT_WAIT_REPLICAS: setting({
    group: 'api',
    file: 'api.accept.waitReplicas',
    readBy: ['api'],
    doc: "Replicas that must acknowledge an accepted run's writes (`WAIT`) before `POST /v1/runs` answers `202`; fewer within TETRALOOP_ACCEPT_WAIT_MS answer `503 not_replicated`. 0: not waited for.",
    schema: z.coerce.number().int().min(0).max(64).default(0),
  }),
  TETRALOOP_ACCEPT_WAITAOF: setting({
    group: 'api',
    file: 'api.accept.waitAof',
    readBy: ['api'],
    doc: '`local`: `POST /v1/runs` waits until Redis fsynced the run to its AOF (`WAITAOF 1 0`, Redis 7.2 and later, AOF on; the API refuses to start otherwise); not within TETRALOOP_ACCEPT_WAIT_MS: `503 not_persisted`. `off`: not waited for.',
    schema: z.enum(ACCEPT_WAITAOF_MODES).default('off'),
  }),
  TETRALOOP_ACCEPT_WAIT_MS: setting({
    group: 'api',
    file: 'api.accept.waitMs',
    readBy: ['api'],
    doc: 'The longest each of the accept waits (`TETRALOOP_ACCEPT_WAIT_REPLICAS`, `TETRALOOP_ACCEPT_WAITAOF`) may take.',
    schema: z.coerce.number().int().min(1).max(60_000).default(1000),
  }),
} satisfies Settings;
export const ApiEnv = envSchema({ ...BASE_SETTINGS, ...API_SETTINGS });
export type ApiEnv = Omit<z.infer<typeof ApiEnv>, 'TETRALOOP_SHUTDOWN_GRACE_MS'> & {
  /** Filled in with the API's own default when unset. */
  readonly TETRALOOP_SHUTDOWN_GRACE_MS: number;
};

/** What `POST /v1/runs` waits for before it answers. */
export function acceptDurabilityOf(env: ApiEnv): AcceptDurability {
  return {
    replicas: env.TETRALOOP_ACCEPT_WAIT_REPLICAS,
    waitAof: env.TETRALOOP_ACCEPT_WAITAOF,
    waitMs: env.TETRALOOP_ACCEPT_WAIT_MS,
  };
}

/** The API keys as configured: how many a tenant may hold, how long a verified one is reused. */
export function apiKeyStoreOptionsOf(env: ApiEnv): ApiKeyStoreOptions {
  return {
    prefix: env.TETRALOOP_PREFIX,
    maxPerTenant: env.TETRALOOP_KEYS_MAX_PER_TENANT,
    cacheMs: env.TETRALOOP_KEY_CACHE_MS,
  };
}

/** The caps on open event streams and waits, per process and per tenant. */
export function longRequestsOf(env: ApiEnv): LongRequestLimits {
  return {
    events: { perProcess: env.TETRALOOP_MAX_STREAMS, perTenant: env.TETRALOOP_MAX_STREAMS_PER_TENANT },
    wait: { perProcess: env.TETRALOOP_MAX_WAITS, perTenant: env.TETRALOOP_MAX_WAITS_PER_TENANT },
  };
}

/** How the event streams of the process are read: readers, and streams named in one read. */
export function eventHubSettingsOf(env: ApiEnv): Pick<RunEventHubOptions, 'readers' | 'maxKeysPerRead'> {
  return { readers: env.TETRALOOP_EVENT_READERS, maxKeysPerRead: env.TETRALOOP_EVENT_READ_KEYS };
}

/** What the app takes from the configuration: request bounds, signals, webhooks, limits, proxies. */
export function appSettingsOf(
  env: ApiEnv,
): Pick<
  AppDeps,
  | 'metricsToken'
  | 'trustProxy'
  | 'bodyLimitBytes'
  | 'jsonMaxDepth'
  | 'maxWaitMs'
  | 'placeTimeoutMs'
  | 'webhooks'
  | 'signalLimits'
  | 'configuredLimits'
  | 'eventPayloadMaxBytes'
  | 'storeValueMaxBytes'
> {
  return {
    ...(env.TETRALOOP_METRICS_TOKEN ? { metricsToken: env.TETRALOOP_METRICS_TOKEN } : {}),
    trustProxy: env.TETRALOOP_TRUST_PROXY,
    bodyLimitBytes: env.TETRALOOP_BODY_LIMIT_BYTES,
    jsonMaxDepth: env.TETRALOOP_JSON_MAX_DEPTH,
    maxWaitMs: env.TETRALOOP_MAX_WAIT_MS,
    placeTimeoutMs: env.TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS,
    webhooks: { sources: env.TETRALOOP_WEBHOOKS, toleranceSeconds: env.TETRALOOP_WEBHOOK_TOLERANCE_SECONDS },
    signalLimits: { maxPerRun: env.TETRALOOP_SIGNALS_MAX_PER_RUN, maxBytes: env.TETRALOOP_SIGNAL_MAX_BYTES },
    configuredLimits: env.TETRALOOP_LIMITS,
    eventPayloadMaxBytes: env.TETRALOOP_EVENT_PAYLOAD_MAX_BYTES,
    storeValueMaxBytes: env.TETRALOOP_STORE_VALUE_MAX_BYTES,
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
  const read = parseEnv(ApiEnv, env);
  const parsed: ApiEnv = {
    ...read,
    TETRALOOP_SHUTDOWN_GRACE_MS: read.TETRALOOP_SHUTDOWN_GRACE_MS ?? SHUTDOWN_GRACE_DEFAULT_MS.api,
  };
  checkAuthExposure(parsed);
  return parsed;
}
