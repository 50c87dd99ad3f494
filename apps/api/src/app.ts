/** The Express app: routes, body limits, Redis gating and error mapping. No listening here. */
import express, { type RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Queue, QueueEvents } from 'bullmq';
import {
  metricsText,
  type Ceilings,
  type RateLimitStore,
  type MemoryServices,
  type RunService,
  type RunStore,
  type RunWaiter,
  type SessionStore,
  type SourceService,
} from '@tetraloop/core';
import { ADMIN_PATH, adminAuth } from './admin.js';
import { blobsRouter } from './blobs-router.js';
import { errorHandler, HttpError, sendError } from './http-errors.js';
import { rateLimit } from './rate-limit.js';
import { runsRouter } from './runs-router.js';
import { memoryRouter } from './memory-router.js';
import { sessionsRouter } from './sessions-router.js';

export interface AppDeps {
  /** Brings scrape-time gauges (queue depths) up to date before /metrics answers. */
  readonly refreshMetrics?: () => Promise<void>;
  /** Mounted behind the admin token when one is configured. */
  readonly admin?: { readonly token: string; readonly router: express.Router };
  readonly redis: Redis;
  readonly store: RunStore;
  /** A fresh connection for one blocking reader (an open event stream). */
  readonly blockingConnection: () => Redis;
  readonly runs: RunService;
  readonly sessionStore: SessionStore;
  /** Memory and lessons; absent with `TETRALOOP_REFLECT=off`. */
  readonly memory?: MemoryServices;
  readonly sources: SourceService;
  readonly senseQueue: Queue;
  readonly senseEvents: QueueEvents;
  readonly waiter: RunWaiter;
  readonly logger: Logger;
  readonly bodyLimitBytes: number;
  readonly maxWaitMs: number;
  /** Request rates per key and tenant (see `rate-limit.ts`). */
  readonly ceilings: Ceilings;
  readonly rateLimits: RateLimitStore;
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  const redisReady = (): boolean => deps.redis.status === 'ready';

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const ok =
      redisReady() &&
      (await deps.redis.ping().then(
        () => true,
        () => false,
      ));
    res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'unavailable', redis: ok ? 'up' : 'down' });
  });

  // Fail fast when Redis is away: a 503 at once, never a hanging request.
  const requireRedis: RequestHandler = (_req, res, next) => {
    if (redisReady()) return next();
    sendError(res, new HttpError(503, 'unavailable', 'Redis is unavailable'));
  };

  app.get('/metrics', async (_req, res) => {
    await deps.refreshMetrics?.();
    const { contentType, body } = await metricsText();
    res.type(contentType).send(body);
  });
  if (deps.admin) app.use(ADMIN_PATH, adminAuth(deps.admin.token), deps.admin.router);

  // The caller is known from here on (auth, when on, goes before the rate limit).
  app.use('/v1', requireRedis, rateLimit(deps), express.json({ limit: deps.bodyLimitBytes, strict: false }));
  app.use('/v1/runs', runsRouter(deps));
  app.use('/v1/blobs', blobsRouter(deps));
  app.use('/v1', sessionsRouter(deps));
  app.use('/v1', memoryRouter(deps));
  app.use((_req, res) => sendError(res, new HttpError(404, 'not_found', 'no such route')));
  app.use(errorHandler(deps.logger, redisReady));
  return app;
}
