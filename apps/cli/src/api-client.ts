/**
 * The one way the `tetraloop` client commands (`run`, `runs`, `explain`, `lessons`, `keys`) call the
 * API: JSON in and out, with `Authorization: Bearer <token>` when a token is given —
 * `TETRALOOP_API_KEY` for `run`, `runs`, `explain` and `lessons`, the root token for `keys` — and a
 * run's event stream read as server-sent events. Failures to connect and answers that are not JSON
 * become errors that say what to set.
 */

/** Where the API is and what to present to it. */
export interface ApiTarget {
  readonly url: string;
  /** Sent as `Authorization: Bearer <token>` when set. */
  readonly token?: string | undefined;
}

export interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
}

export const DEFAULT_API_URL = 'http://localhost:3000';

/** The API a client command talks to, with `TETRALOOP_API_KEY` as its bearer when that is set. */
export function apiTargetFromEnv(env: NodeJS.ProcessEnv = process.env): ApiTarget {
  const token = env.TETRALOOP_API_KEY?.trim();
  return { url: env.TETRALOOP_API_URL ?? DEFAULT_API_URL, ...(token ? { token } : {}) };
}

/** The API could not be reached at all (refused, unknown host, reset). */
export class ApiUnreachableError extends Error {
  constructor(
    readonly url: string,
    readonly why: string,
  ) {
    super(`cannot reach the API at ${url} (${why}); set TETRALOOP_API_URL`);
    this.name = 'ApiUnreachableError';
  }
}

/** The API answered something that is not JSON (a proxy's page, another server). */
export class ApiNotJsonError extends Error {
  constructor(url: string, status: number, text: string) {
    super(`the API at ${url} answered ${status} with no JSON: ${text.slice(0, 200)}`);
    this.name = 'ApiNotJsonError';
  }
}

const baseOf = (target: ApiTarget): string => target.url.replace(/\/+$/, '');

/** The headers of a request: the bearer token when there is one, and the body's type. */
export function apiHeaders(
  target: ApiTarget,
  json: boolean,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    ...(json ? { 'content-type': 'application/json' } : {}),
    ...(target.token ? { authorization: `Bearer ${target.token}` } : {}),
    ...extra,
  };
}

/** One request; the body of the answer parsed as JSON (`null` for an empty answer such as 204). */
export async function apiRequest(
  target: ApiTarget,
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<ApiAnswer> {
  const base = baseOf(target);
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, {
      method,
      headers: apiHeaders(target, body !== undefined),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new ApiUnreachableError(base, cause?.code ?? cause?.message ?? (err as Error).message);
  }
  const text = await res.text();
  if (text === '') return { status: res.status, body: null };
  try {
    return { status: res.status, body: JSON.parse(text) as unknown };
  } catch {
    throw new ApiNotJsonError(base, res.status, text);
  }
}

interface ErrorBody {
  error?: { code?: string; message?: string; issues?: { path: string; message: string }[] };
}

/** The `code` of the API's error answer (`{error: {code, message, issues?}}`). */
export const errorCodeOf = (body: unknown): string | undefined => (body as ErrorBody | null)?.error?.code;

/**
 * The API's error answer as a message for a person, with what to do about a 401 or a 403 —
 * `credential` names what the command sends (e.g. `TETRALOOP_API_KEY`).
 */
export function describeApiError(answer: ApiAnswer, credential: string): string {
  const error = (answer.body as ErrorBody | null)?.error;
  const said = error
    ? `the API answered ${answer.status} ${error.code ?? ''}: ${error.message ?? ''}${(error.issues ?? [])
        .map((i) => `\n  ${i.path}: ${i.message}`)
        .join('')}`
    : `the API answered ${answer.status}: ${JSON.stringify(answer.body)}`;
  const hint = authHint(answer.status, credential);
  return hint ? `${said}\n${hint}` : said;
}

/** What to do about a refused credential, for a 401 or a 403; undefined otherwise. */
export function authHint(status: number, credential: string): string | undefined {
  if (status === 401) {
    return `not authenticated: set ${credential} to a valid key (the API requires one: TETRALOOP_AUTH=required)`;
  }
  if (status === 403)
    return `forbidden: the credential in ${credential} may not do this (a scope is missing)`;
  return undefined;
}

/** The API refused a request the caller cannot go on without (its answer says why). */
export class ApiRefusedError extends Error {
  constructor(readonly answer: ApiAnswer) {
    super(`the API answered ${answer.status}`);
    this.name = 'ApiRefusedError';
  }
}

/** The query of `GET /v1/runs`: each filter given is sent. */
export interface RunsQuery {
  readonly status?: string | undefined;
  readonly agentId?: string | undefined;
  readonly sessionKey?: string | undefined;
  readonly tag?: string | undefined;
  /** An ISO time or a duration before now (`1h`). */
  readonly since?: string | undefined;
  readonly until?: string | undefined;
  readonly limit?: number | undefined;
  readonly cursor?: string | undefined;
}

/** `POST /v1/runs`. */
export const submitRun = (target: ApiTarget, body: unknown): Promise<ApiAnswer> =>
  apiRequest(target, 'POST', '/v1/runs', body);

/** `GET /v1/runs/:id`. */
export const getRun = (target: ApiTarget, runId: string): Promise<ApiAnswer> =>
  apiRequest(target, 'GET', `/v1/runs/${encodeURIComponent(runId)}`);

/** `GET /v1/runs/:id/wait`: 200 once the run settled, 202 when `timeoutMs` passed first. */
export const waitForRun = (target: ApiTarget, runId: string, timeoutMs: number): Promise<ApiAnswer> =>
  apiRequest(target, 'GET', `/v1/runs/${encodeURIComponent(runId)}/wait?timeoutMs=${timeoutMs}`);

/** `GET /v1/runs/:id/explain`. */
export const explainRun = (target: ApiTarget, runId: string): Promise<ApiAnswer> =>
  apiRequest(target, 'GET', `/v1/runs/${encodeURIComponent(runId)}/explain`);

/** `GET /v1/runs` with the filters given. */
export function listRuns(target: ApiTarget, query: RunsQuery): Promise<ApiAnswer> {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query) as [string, string | number | undefined][]) {
    if (value !== undefined) params.set(name, String(value));
  }
  const text = params.toString();
  return apiRequest(target, 'GET', `/v1/runs${text ? `?${text}` : ''}`);
}

/** One event of a run's stream, as the API sends it (see docs/api.md, `GET /v1/runs/:id/events`). */
export interface StreamedRunEvent {
  /** Absent on `events.truncated`, which says events were trimmed. */
  readonly seq?: number;
  readonly type: string;
  readonly ts?: number;
  readonly nodeId?: string;
  readonly data?: unknown;
}

/**
 * A run's events after `after` (its `seq`), from `GET /v1/runs/:id/events`, as they come: replayed,
 * then live. Ends when the API closes the stream (after the run finished) or `signal` aborts.
 * Throws ApiUnreachableError when the API cannot be reached, ApiRefusedError when it says no.
 */
export async function* runEvents(
  target: ApiTarget,
  runId: string,
  after: number,
  signal?: AbortSignal,
): AsyncGenerator<StreamedRunEvent> {
  const base = baseOf(target);
  let res: Response;
  try {
    res = await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}/events`, {
      headers: apiHeaders(target, false, { accept: 'text/event-stream', 'last-event-id': String(after) }),
      ...(signal ? { signal } : {}),
    });
  } catch (err) {
    if (signal?.aborted) return;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new ApiUnreachableError(base, cause?.code ?? cause?.message ?? (err as Error).message);
  }
  if (res.status !== 200 || !res.body) {
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text) as unknown;
    } catch {
      // Not JSON: the text itself says what went wrong.
    }
    throw new ApiRefusedError({ status: res.status, body });
  }
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parseSseBlock(block);
        if (event) yield event;
      }
    }
  } catch (err) {
    if (signal?.aborted) return;
    throw new ApiUnreachableError(base, (err as Error).message);
  }
}

/** The run event of one SSE block (the lines between blank lines); none for a comment. */
export function parseSseBlock(block: string): StreamedRunEvent | undefined {
  const data = block
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trimStart())
    .join('\n');
  if (data === '') return undefined;
  try {
    return JSON.parse(data) as StreamedRunEvent;
  } catch {
    return undefined;
  }
}
