/** The API's error shape and the mapping from what went wrong to a status code. */
import type { ErrorRequestHandler, Response } from 'express';
import { GraphRejectedError, RequestRefusedError, RunStateConflictError } from '@tetraloop/core/runs';
import { isRedisUnavailable } from '@tetraloop/core/runtime';
import { DefaultTenantError, KeyLimitError, WebhookStoreError } from '@tetraloop/core/state';
import { TriggerLimitError } from '@tetraloop/core/triggers';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ApiError, ApiIssue } from './answers.js';
import { noteErrorCode } from './http-metrics.js';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues: readonly ApiIssue[] = [],
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const sendError = (res: Response, err: HttpError): void => {
  noteErrorCode(res, err.code);
  res.status(err.status).json({
    error: {
      code: err.code,
      message: err.message,
      ...(err.issues.length > 0 ? { issues: [...err.issues] } : {}),
    },
  } satisfies ApiError);
};

/** Seconds a client is told to wait before retrying while Redis is unavailable. */
const UNAVAILABLE_RETRY_AFTER_SECONDS = 1;

/** `503 unavailable` with `Retry-After`: Redis cannot be reached; the request changed nothing it can't repeat. */
export const sendUnavailable = (res: Response): void => {
  res.set('Retry-After', String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  sendError(res, new HttpError(503, 'unavailable', 'Redis is unavailable'));
};

export function zodToHttp(error: z.ZodError, prefix: string[] = []): HttpError {
  const issues = error.issues.map((i) => ({
    path: [...prefix, ...i.path.map(String)].join('.'),
    message: i.message,
  }));
  return new HttpError(400, 'invalid_request', 'the request is invalid', issues);
}

/** body-parser reports its failures with a `type`; these are the client's mistakes. */
function bodyParserError(err: unknown): HttpError | undefined {
  if (typeof err !== 'object' || err === null || !('type' in err)) return undefined;
  switch (err.type) {
    case 'entity.parse.failed':
      return new HttpError(400, 'invalid_json', 'the body is not valid JSON');
    case 'entity.too.deep':
      return new HttpError(400, 'json_too_deep', (err as { message?: string }).message ?? 'too deep');
    case 'entity.too.large':
      return new HttpError(413, 'body_too_large', 'the body exceeds the size limit');
    case 'encoding.unsupported':
      return new HttpError(415, 'unsupported_encoding', 'unsupported body encoding');
    case 'charset.unsupported':
      return new HttpError(415, 'unsupported_charset', 'send JSON as UTF-8 (charset=utf-8, or none)');
    default:
      return undefined;
  }
}

/**
 * A refusal the API knows as its HTTP answer: its own `HttpError`s, the services' typed refusals
 * (an invalid graph, a conflict, a limit), zod's and the body parser's. Undefined for anything
 * else (Redis away, a bug).
 */
export function knownHttpError(err: unknown): HttpError | undefined {
  if (err instanceof HttpError) return err;
  if (err instanceof GraphRejectedError) {
    return new HttpError(400, 'invalid_graph', 'the graph is invalid', err.issues);
  }
  if (err instanceof RequestRefusedError) {
    return new HttpError(400, 'invalid_request', 'the request is refused', err.issues);
  }
  if (err instanceof RunStateConflictError) return new HttpError(409, err.code, err.message);
  if (err instanceof KeyLimitError) return new HttpError(409, 'key_limit', err.message);
  // A run's `webhook` refused at submit (no signing secret, or no secret key to keep one).
  if (err instanceof WebhookStoreError) return new HttpError(409, err.code, err.message);
  if (err instanceof TriggerLimitError) return new HttpError(409, err.code, err.message);
  if (err instanceof DefaultTenantError) return new HttpError(409, 'default_tenant', err.message);
  if (err instanceof z.ZodError) return zodToHttp(err);
  return bodyParserError(err);
}

export function errorHandler(
  logger: Logger,
  redisReady: () => boolean,
  /** The API's Redis is a cluster: a redirection it could not follow is an outage too. */
  clustered = false,
): ErrorRequestHandler {
  return (err: unknown, _req, res, _next) => {
    const known = knownHttpError(err);
    if (known) return sendError(res, known);
    // Redis went away mid-request: the dependency is unavailable, not the server broken. The error
    // says so even when the connection's status has not caught up yet (still `ready`).
    if (isRedisUnavailable(err, { clustered }) || !redisReady()) return sendUnavailable(res);
    logger.error({ err }, 'unhandled error');
    sendError(res, new HttpError(500, 'internal', 'internal error'));
  };
}
