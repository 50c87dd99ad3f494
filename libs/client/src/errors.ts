/**
 * How a call fails, by kind: the API answered with an error (`TetraloopApiError`, its `code` from
 * `{error: {code, message, issues?}}`), could not be reached (`TetraloopUnreachableError`), or
 * answered something that is not the API's (`TetraloopNotJsonError`: a proxy's page, another
 * server). Recognise them by class and `code`, never by message.
 */
import type { ApiIssue } from './types.js';

/** The API answered with an error status. */
export class TetraloopApiError extends Error {
  /** The error's `code` (`run_not_found`, `invalid_graph`, `rate_limited`…); undefined if the body had none. */
  readonly code: string | undefined;
  readonly issues: readonly ApiIssue[];
  /** Seconds the API asked to wait before a retry (`Retry-After`), when it said. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly status: number,
    /** The answer's body as it came (the error shape, or whatever else was said). */
    readonly body: unknown,
    retryAfter: string | null = null,
  ) {
    const error = (body as { error?: { code?: unknown; message?: unknown; issues?: unknown } } | null)?.error;
    const code = typeof error?.code === 'string' ? error.code : undefined;
    const message = typeof error?.message === 'string' ? error.message : JSON.stringify(body);
    super(`the API answered ${status}${code ? ` ${code}` : ''}: ${message}`);
    this.name = 'TetraloopApiError';
    this.code = code;
    this.issues = Array.isArray(error?.issues) ? (error.issues as ApiIssue[]) : [];
    const seconds = retryAfter === null ? Number.NaN : Number(retryAfter);
    this.retryAfterSeconds = Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
  }
}

/** The API could not be reached at all (refused, unknown host, reset before an answer). */
export class TetraloopUnreachableError extends Error {
  constructor(
    readonly baseUrl: string,
    /** What the transport said: an error code such as `ECONNREFUSED`, or its message. */
    readonly why: string,
  ) {
    super(`cannot reach the API at ${baseUrl} (${why})`);
    this.name = 'TetraloopUnreachableError';
  }
}

/** Something answered that is not the API: not JSON where the API answers JSON. */
export class TetraloopNotJsonError extends Error {
  constructor(
    readonly baseUrl: string,
    readonly status: number,
    readonly text: string,
  ) {
    super(`the API at ${baseUrl} answered ${status} with no JSON: ${text.slice(0, 200)}`);
    this.name = 'TetraloopNotJsonError';
  }
}

/** What a failed `fetch` says about why: the cause's code (`ECONNREFUSED`), else a message. */
export function transportWhy(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  return err instanceof Error ? err.message : String(err);
}
