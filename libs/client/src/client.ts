/**
 * The Tetraloop API client: `api` calls any route, typed from the API's OpenAPI document
 * (openapi-fetch over the generated `paths`); beside it, what generation cannot give — `submit`,
 * `get`, `wait` (long-polls until the run settles, across as many `/wait` calls as it takes),
 * `events` (a run's server-sent events as an async iterator that resumes with `Last-Event-ID`) and
 * `sessions` (send a message, read the lane, read the transcript). It talks HTTP only: no server code.
 */
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import {
  TetraloopApiError,
  TetraloopNotJsonError,
  TetraloopUnreachableError,
  transportWhy,
} from './errors.js';
import { followEvents, type EventsOptions } from './events.js';
import type { paths } from './generated/openapi.js';
import type {
  MessageAnswer,
  MessageBody,
  RerunAccepted,
  RunAccepted,
  RunDocument,
  RunExplain,
  RunPage,
  RunRequest,
  RunSearch,
  SessionPage,
  SessionView,
  StreamEvent,
  TranscriptEntry,
  TranscriptHeader,
} from './types.js';

export interface TetraloopClientOptions {
  /** Where the API is, e.g. `http://localhost:3000`. */
  readonly baseUrl: string;
  /** An API key (`tl_<keyId>_<secret>`) or the root token, sent as `Authorization: Bearer <token>`. */
  readonly token?: string | undefined;
  /** Root token only: the tenant to act for (`X-Tetraloop-Tenant`). */
  readonly tenant?: string | undefined;
  /** @defaultValue globalThis.fetch */
  readonly fetch?: (input: Request) => Promise<Response>;
}

export interface WaitOptions {
  /**
   * Longest single `/wait` call, in ms: a run still going after it is asked again (and `onProgress`
   * sees its document). At most the API's `TETRALOOP_MAX_WAIT_MS`.
   * @defaultValue 30000
   */
  readonly sliceMs?: number;
  /** Called with the run's document after each slice that ended before the run settled. */
  readonly onProgress?: (doc: RunDocument) => void;
  readonly signal?: AbortSignal;
}

/** The run did not settle within the time `wait` was given; `last` is its latest document. */
export class RunWaitTimeoutError extends Error {
  constructor(
    readonly runId: string,
    readonly timeoutMs: number,
    readonly last: RunDocument,
  ) {
    super(`run ${runId} did not settle within ${timeoutMs} ms (status ${last.status})`);
    this.name = 'RunWaitTimeoutError';
  }
}

/** One page of a transcript: its header line and its entries. */
export interface TranscriptPage {
  readonly header: TranscriptHeader;
  readonly lines: TranscriptEntry[];
}

/** What openapi-fetch resolves a call with. */
interface Answered<T> {
  readonly data?: T;
  readonly error?: unknown;
  readonly response: Response;
}

/**
 * The data of a successful answer; a `TetraloopApiError` for an error answer. (openapi-fetch types
 * the data as read-only views, where a `[from, to]` edge reads as `string[]`: the helpers below
 * answer the document's own types.)
 */
export function unwrap<T>(answer: Answered<T>): T {
  if (answer.error !== undefined || !answer.response.ok) {
    throw new TetraloopApiError(
      answer.response.status,
      answer.error ?? null,
      answer.response.headers.get('retry-after'),
    );
  }
  return answer.data as T;
}

const JSON_MEDIA = /^application\/([\w.-]+\+)?json\b/i;

/**
 * Turns a failure to reach the API into `TetraloopUnreachableError`, and an answer that should be
 * JSON but is not (a proxy's page) into `TetraloopNotJsonError`.
 */
function transportErrors(baseUrl: string): Middleware {
  return {
    async onResponse({ response, options }) {
      if (options.parseAs !== 'json' && response.ok) return undefined;
      if (response.status === 204 || response.headers.get('content-length') === '0') return undefined;
      if (JSON_MEDIA.test(response.headers.get('content-type') ?? '')) return undefined;
      throw new TetraloopNotJsonError(baseUrl, response.status, await response.text());
    },
    onError({ error }) {
      if (error instanceof Error && error.name === 'AbortError') return error;
      return new TetraloopUnreachableError(baseUrl, transportWhy(error));
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class TetraloopClient {
  /** Every route of the API, typed from its OpenAPI document. */
  readonly api: Client<paths>;
  readonly baseUrl: string;
  /** Session messages, lanes and transcripts. */
  readonly sessions: SessionsClient;

  constructor(options: TetraloopClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.api = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: {
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        ...(options.tenant ? { 'x-tetraloop-tenant': options.tenant } : {}),
      },
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.api.use(transportErrors(this.baseUrl));
    this.sessions = new SessionsClient(this.api);
  }

  /** Submits a run; with `idempotencyKey`, every submit with that key gets the same run. */
  async submit(request: RunRequest, options: { idempotencyKey?: string } = {}): Promise<RunAccepted> {
    return unwrap(
      await this.api.POST('/v1/runs', {
        body: request,
        params: options.idempotencyKey ? { header: { 'Idempotency-Key': options.idempotencyKey } } : {},
      }),
    );
  }

  /** The run's document; `expand: 'blobs'` shows large outputs in full. */
  async get(runId: string, options: { expand?: 'blobs' } = {}): Promise<RunDocument> {
    const answer = await this.api.GET('/v1/runs/{id}', {
      params: { path: { id: runId }, query: options.expand ? { expand: options.expand } : {} },
    });
    return unwrap(answer) as RunDocument;
  }

  /** A page of the tenant's runs, newest first, filtered by `search` (`nextCursor` → `cursor`). */
  async list(search: RunSearch = {}): Promise<RunPage> {
    return unwrap<RunPage>(await this.api.GET('/v1/runs', { params: { query: search } }));
  }

  /** Where the run's time went: each node's waits and execution, the critical path, the parallelism. */
  async explain(runId: string): Promise<RunExplain> {
    return unwrap(await this.api.GET('/v1/runs/{id}/explain', { params: { path: { id: runId } } }));
  }

  /**
   * A new run forked from a settled one at node `from`: it reuses every snapshot not downstream of
   * it. With `idempotencyKey`, every rerun with that key gets the same run.
   */
  async rerun(
    runId: string,
    from: string,
    options: { idempotencyKey?: string } = {},
  ): Promise<RerunAccepted> {
    return unwrap(
      await this.api.POST('/v1/runs/{id}/rerun', {
        params: {
          path: { id: runId },
          ...(options.idempotencyKey ? { header: { 'Idempotency-Key': options.idempotencyKey } } : {}),
        },
        body: { from },
      }),
    );
  }

  /**
   * Waits until the run settles and answers its document, long-polling `/wait` in slices of
   * `sliceMs`; a `429` or `503` (the API's caps, or Redis away) is retried after its `Retry-After`.
   * Throws `RunWaitTimeoutError` when `timeoutMs` passes first.
   */
  async wait(runId: string, timeoutMs: number = Infinity, options: WaitOptions = {}): Promise<RunDocument> {
    const deadline = Date.now() + timeoutMs;
    const sliceMs = options.sliceMs ?? 30_000;
    for (;;) {
      const left = Math.max(0, deadline - Date.now());
      const answer = await this.api.GET('/v1/runs/{id}/wait', {
        params: { path: { id: runId }, query: { timeoutMs: Math.floor(Math.min(sliceMs, left)) } },
        ...(options.signal ? { signal: options.signal } : {}),
      });
      if (answer.response.status === 200) return unwrap(answer) as RunDocument;
      if (answer.response.status === 202) {
        const doc = unwrap(answer) as RunDocument;
        if (Date.now() >= deadline) throw new RunWaitTimeoutError(runId, timeoutMs, doc);
        options.onProgress?.(doc);
        continue;
      }
      const err = new TetraloopApiError(
        answer.response.status,
        answer.error ?? null,
        answer.response.headers.get('retry-after'),
      );
      const busy = err.status === 429 || err.status === 503;
      if (!busy || err.retryAfterSeconds === undefined) throw err;
      const pause = err.retryAfterSeconds * 1000;
      if (Date.now() + pause >= deadline) throw err;
      await sleep(pause);
    }
  }

  /**
   * The run's events as they happen (after `lastEventId` when given): replayed, then live, until
   * the run finishes. A dropped connection is reopened with `Last-Event-ID` = the last event
   * yielded, so the sequence has no gap and no repeat; an `events.truncated` notice (no `seq`) says
   * when the API no longer keeps some events.
   */
  events(runId: string, options: EventsOptions = {}): AsyncGenerator<StreamEvent> {
    return followEvents(
      async (lastEventId, signal) => {
        const answer = await this.api.GET('/v1/runs/{id}/events', {
          params: {
            path: { id: runId },
            header: lastEventId === undefined ? {} : { 'Last-Event-ID': lastEventId },
          },
          parseAs: 'stream',
          ...(signal ? { signal } : {}),
        });
        const body = unwrap(answer);
        if (!body) throw new TetraloopNotJsonError(this.baseUrl, answer.response.status, '');
        return body;
      },
      (err) => {
        if (err instanceof TetraloopUnreachableError) return { retry: true };
        if (err instanceof TetraloopApiError && (err.status === 429 || err.status === 503)) {
          return {
            retry: true,
            ...(err.retryAfterSeconds === undefined ? {} : { afterMs: err.retryAfterSeconds * 1000 }),
          };
        }
        return { retry: false };
      },
      options,
    );
  }
}

/** Session messages, lanes and transcripts. */
export class SessionsClient {
  constructor(private readonly api: Client<paths>) {}

  /** Sends a message to the session; answers the lane's decision (the run it made, its place…). */
  async send(sessionKey: string, message: MessageBody): Promise<MessageAnswer> {
    return unwrap(
      await this.api.POST('/v1/sessions/{sessionKey}/messages', {
        params: { path: { sessionKey } },
        body: message,
      }),
    );
  }

  /** A page of the tenant's sessions with their lanes, most recently written first. */
  async list(page: { limit?: number; cursor?: string } = {}): Promise<SessionPage> {
    return unwrap<SessionPage>(await this.api.GET('/v1/sessions', { params: { query: page } }));
  }

  /** The session's lane: the running run, the waiting items, the environment version. */
  async get(sessionKey: string): Promise<SessionView> {
    return unwrap(await this.api.GET('/v1/sessions/{sessionKey}', { params: { path: { sessionKey } } }));
  }

  /**
   * One page of the session's transcript: at most `limit` lines after line number `after` (from
   * the oldest kept without it). The header's `next` is the `after` of the next page (null: done).
   */
  async transcript(
    sessionKey: string,
    page: { after?: number; limit?: number } = {},
  ): Promise<TranscriptPage> {
    const text = unwrap(
      await this.api.GET('/v1/sessions/{sessionKey}/transcript', {
        params: { path: { sessionKey }, query: page },
        parseAs: 'text',
      }),
    );
    const [header, ...lines] = text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as unknown);
    return { header: header as TranscriptHeader, lines: lines as TranscriptEntry[] };
  }

  /** Every line of the transcript kept now, page by page. */
  async *lines(sessionKey: string, pageSize = 1000): AsyncGenerator<TranscriptEntry> {
    let after: number | undefined;
    for (;;) {
      const page = await this.transcript(sessionKey, {
        limit: pageSize,
        ...(after === undefined ? {} : { after }),
      });
      yield* page.lines;
      if (page.header.next === null) return;
      after = page.header.next;
    }
  }
}
