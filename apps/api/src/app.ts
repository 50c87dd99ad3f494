/** The Express app: routes, body limits, RedisClient gating and error mapping. No listening here. */
import express, { type RequestHandler } from 'express';
import type { Ceilings } from '@tetraloop/core/ceilings';
import type { SignalLimits } from '@tetraloop/core/domain';
import type { LimitsDocument } from '@tetraloop/core/flow';
import type { RunEventHub, RunService, RunWaiter } from '@tetraloop/core/runs';
import { isCluster, type RedisClient, type MemoryServices } from '@tetraloop/core/runtime';
import type { WebhookSettings, SourceService } from '@tetraloop/core/sessions';
import type {
  FlowStore,
  CostLedger,
  RateLimitStore,
  RunStore,
  SecretStore,
  WebhookStore,
  SessionStore,
  ItemStore,
} from '@tetraloop/core/state';
import { metricsText } from '@tetraloop/core/telemetry';
import type { EventIntake, TriggerBook } from '@tetraloop/core/triggers';
import type { Logger } from 'pino';
import type { Queue, QueueEvents } from 'bullmq';
import { a2aHandlers, WELL_KNOWN_CARD_PATH, wellKnownCard } from './a2a/a2a-router.js';
import type { AdminBoard } from './admin.js';
import type { Liveness, Readiness } from './answers.js';
import { authenticate, authorize, bearerOf, sameSecret, type AuthSettings } from './auth.js';
import { aguiHandlers } from './agui/agui-router.js';
import { blobHandlers } from './blobs-router.js';
import { mountConsole } from './console-pages.js';
import { errorHandler, HttpError, sendError, sendUnavailable } from './http-errors.js';
import { checkJsonBody } from './json-depth.js';
import type { LongRequests } from './long-requests.js';
import { keyHandlers, type KeysRouterDeps } from './keys-router.js';
import { limitHandlers } from './limits-router.js';
import { httpMetrics } from './http-metrics.js';
import { mcpHandlers } from './mcp/mcp-router.js';
import { memoryHandlers } from './memory-router.js';
import { mountApiReference } from './openapi/reference-page.js';
import { LANGGRAPH_BASE, ROUTES, type RouteName } from './route-table.js';
import { langGraphHandlers } from './langgraph/router.js';
import { runHandlers } from './runs-router.js';
import { runInsightHandlers } from './run-insight-router.js';
import { mapItemHandlers } from './map-item-router.js';
import { secretHandlers } from './secrets-router.js';
import { sessionHandlers, type RawBodyRequest } from './sessions-router.js';
import { rateLimit } from './rate-limit.js';
import type { TrustProxy } from './trust-proxy.js';
import { usageHandlers } from './usage-router.js';
import { toolHandlers, type ToolsRouterDeps } from './tools-router.js';
import { webhookHandlers } from './webhooks-router.js';
import { scheduleHandlers, type SchedulesRouterDeps } from './schedules-router.js';
import { eventHandlers } from './events-router.js';
import { triggerHandlers } from './triggers-router.js';

export interface AppDeps {
  /** Brings scrape-time gauges (queue depths) up to date before /metrics answers. */
  readonly refreshMetrics?: () => Promise<void>;
  /** Bull Board behind the root token, when one is configured. */
  readonly admin?: AdminBoard;
  readonly auth: AuthSettings;
  /** Deletes a tenant with all its data. */
  readonly purgeTenant: KeysRouterDeps['purgeTenant'];
  /** A token `/metrics` asks for; open when unset. */
  readonly metricsToken?: string;
  /** Express's `trust proxy` (`TETRALOOP_TRUST_PROXY`): whose `X-Forwarded-*` are believed. @defaultValue false */
  readonly trustProxy?: TrustProxy;
  readonly redis: RedisClient;
  readonly store: RunStore;
  /** Feeds every open event stream from a few blocking connections. */
  readonly hub: RunEventHub;
  /** Caps on open event streams and waits. */
  readonly longRequests: LongRequests;
  readonly runs: RunService;
  readonly sessionStore: SessionStore;
  /** Memory and lessons; absent with `TETRALOOP_REFLECT=off`. */
  readonly memory?: MemoryServices;
  readonly sources: SourceService;
  /** Each tenant's secrets (write-only over HTTP). */
  readonly secrets: SecretStore;
  /** Each tenant's outbound webhooks: subscriptions, signing secrets, delivery attempts. */
  readonly outboundWebhooks: WebhookStore;
  /** Each tenant's schedules. */
  readonly schedules: SchedulesRouterDeps['schedules'];
  /** Each tenant's daily model spending. */
  readonly costs: CostLedger;
  /** Each tenant's triggers, and where its events come in. */
  readonly triggers: TriggerBook;
  readonly events: EventIntake;
  /** `TETRALOOP_EVENT_PAYLOAD_MAX_BYTES`: the largest event payload, as JSON. */
  readonly eventPayloadMaxBytes: number;
  /** Each tenant's LangGraph store items (`/langgraph/store`). */
  readonly items: ItemStore;
  /** `TETRALOOP_STORE_VALUE_MAX_BYTES`: the largest store item value, as JSON. */
  readonly storeValueMaxBytes: number;
  /** Every tool graphs may name, and the custom tool catalog. */
  readonly tools: ToolsRouterDeps['tools'];
  readonly toolCatalog: ToolsRouterDeps['toolCatalog'];
  readonly senseQueue: Queue;
  readonly senseEvents: QueueEvents;
  readonly waiter: RunWaiter;
  readonly logger: Logger;
  readonly bodyLimitBytes: number;
  /** Deepest nesting a JSON body may have (checked on the raw bytes, before parsing). */
  readonly jsonMaxDepth: number;
  readonly maxWaitMs: number;
  /** `TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS`: how long a message's POST waits for the lane's decision. */
  readonly placeTimeoutMs?: number;
  readonly signalLimits: SignalLimits;
  readonly webhooks: WebhookSettings;
  /** Request rates per key and tenant (see `rate-limit.ts`). */
  readonly ceilings: Ceilings;
  readonly rateLimits: RateLimitStore;
  /** Flow control's counters and the limits set through the API. */
  readonly flow: FlowStore;
  readonly configuredLimits: LimitsDocument;
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  // Behind a trusted TLS proxy, `req.secure` follows its `X-Forwarded-Proto`.
  app.set('trust proxy', deps.trustProxy ?? false);
  const redisReady = (): boolean => deps.redis.status === 'ready';
  app.use(httpMetrics());

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' } satisfies Liveness);
  });
  app.get('/readyz', async (_req, res) => {
    const ok =
      redisReady() &&
      (await deps.redis.ping().then(
        () => true,
        () => false,
      ));
    res
      .status(ok ? 200 : 503)
      .json({ status: ok ? 'ready' : 'unavailable', redis: ok ? 'up' : 'down' } satisfies Readiness);
  });

  // Fail fast when Redis is away: a 503 at once, never a hanging request.
  const requireRedis: RequestHandler = (_req, res, next) => {
    if (redisReady()) return next();
    sendUnavailable(res);
  };

  app.get('/metrics', async (req, res) => {
    const bearer = bearerOf(req);
    if (deps.metricsToken && !(bearer !== undefined && sameSecret(bearer, deps.metricsToken))) {
      return sendError(res, new HttpError(401, 'unauthorized', 'send the metrics token as a bearer token'));
    }
    await deps.refreshMetrics?.();
    const { contentType, body } = await metricsText();
    res.type(contentType).send(body);
  });
  if (deps.admin) deps.admin.mount(app);
  // The OpenAPI document and its reference page: open, like /healthz.
  mountApiReference(app, { maxWaitMs: deps.maxWaitMs });
  // The browser console: open too (its pages hold no data; they call /v1 with the person's key).
  mountConsole(app);
  // The default agent's A2A card: open too (it names no tenant's data; docs/security.md).
  app.get(WELL_KNOWN_CARD_PATH, wellKnownCard);

  // The raw body stays on the request: a webhook's signature is over its exact bytes. A body
  // not in UTF-8, or nested too deep, is refused before it is parsed: nothing after the parser
  // walks it. MCP's messages are held to the same.
  const jsonBody = express.json({
    limit: deps.bodyLimitBytes,
    strict: false,
    verify: (req, _res, buf, charset) => {
      checkJsonBody(buf, charset, deps.jsonMaxDepth);
      (req as RawBodyRequest).rawBody = buf;
    },
  });
  app.use('/v1', requireRedis, jsonBody);
  app.use('/mcp', requireRedis, jsonBody);
  app.use(LANGGRAPH_BASE, requireRedis, jsonBody);
  const callers = {
    v1: [authenticate(deps.auth), rateLimit(deps)],
    // LangGraph's SDK sends its key as `X-Api-Key`.
    langgraph: [authenticate(deps.auth, { apiKeyHeader: true }), rateLimit(deps)],
  };
  mountRoutes(app, callers, {
    ...runHandlers(deps),
    ...runInsightHandlers(deps),
    ...mapItemHandlers(deps),
    ...blobHandlers(deps),
    ...sessionHandlers(deps),
    ...a2aHandlers(deps),
    ...aguiHandlers(deps),
    ...memoryHandlers(deps),
    ...secretHandlers(deps),
    ...webhookHandlers(deps),
    ...scheduleHandlers(deps),
    ...eventHandlers(deps),
    ...triggerHandlers(deps),
    ...usageHandlers(deps),
    ...toolHandlers(deps),
    ...keyHandlers({ keys: deps.auth.keys, purgeTenant: deps.purgeTenant }),
    ...limitHandlers(deps),
    ...mcpHandlers(deps),
    ...langGraphHandlers(deps),
  });
  app.use((_req, res) => sendError(res, new HttpError(404, 'not_found', 'no such route')));
  app.use(errorHandler(deps.logger, redisReady, isCluster(deps.redis)));
  return app;
}

/**
 * Mounts every route of the table behind its access check. A route without a handler, or a
 * handler without a route, is a programming error caught at boot.
 */
function mountRoutes(
  app: express.Express,
  /** Who the caller is, then whether it may make one more request now: for `/v1`, and for `/langgraph`. */
  callers: { v1: RequestHandler[]; langgraph: RequestHandler[] },
  handlers: Partial<Record<RouteName, RequestHandler>>,
): void {
  for (const name of Object.keys(handlers)) {
    if (!(name in ROUTES)) throw new Error(`handler ${name} has no route in the route table`);
  }
  for (const [name, route] of Object.entries(ROUTES) as [RouteName, (typeof ROUTES)[RouteName]][]) {
    const handler = handlers[name];
    if (!handler)
      throw new Error(`route ${name} (${route.method.toUpperCase()} ${route.path}) has no handler`);
    // A signed webhook carries its signature instead of a key.
    const caller = route.path.startsWith(`${LANGGRAPH_BASE}/`) ? callers.langgraph : callers.v1;
    const who: RequestHandler[] = route.access === 'signature' ? [] : caller;
    app[route.method](route.path, ...who, authorize(route.access), handler);
  }
}

/** A route the app answers: its method and its Express path. */
export interface RegisteredRoute {
  readonly method: string;
  readonly path: string;
}

/** Every route registered on the app itself (middleware mounted with `use`, such as Bull Board, is not). */
export function registeredRoutes(app: express.Express): RegisteredRoute[] {
  const stack = (app as unknown as { router: { stack: { route?: { path: unknown; methods: object } }[] } })
    .router.stack;
  return stack.flatMap((layer) =>
    layer.route && typeof layer.route.path === 'string'
      ? Object.keys(layer.route.methods).map((method) => ({ method, path: layer.route!.path as string }))
      : [],
  );
}
