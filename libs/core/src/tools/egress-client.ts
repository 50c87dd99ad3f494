/**
 * Every outbound HTTP request of the workers (the `http` tool, polled sources) goes through here:
 * the egress policy (a literal private address refused at once, a name's DNS answer checked
 * inside the socket's lookup), no redirects followed (a 3xx is an answer like any other, so a
 * public host cannot bounce a request to an internal one), and a response body read as a stream
 * and refused once it passes the policy's byte cap. undici loads at a process's first request: a
 * process that sends none (the API) never loads it, and starts sooner.
 */
import type * as Undici from 'undici';
import type { Dispatcher } from 'undici';
import { checkLiteralAddress, guardedLookup, isAllowlisted, type EgressPolicy } from './egress-policy.js';

/** A response body longer than the policy's `maxResponseBytes`. */
export class ResponseTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the response is larger than ${limit} bytes (TETRALOOP_HTTP_MAX_BYTES)`);
    this.name = 'ResponseTooLargeError';
  }
}

export interface EgressRequest {
  readonly method?: Dispatcher.HttpMethod;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly signal?: AbortSignal;
  /** Time to the headers, and between body chunks. */
  readonly timeoutMs?: number;
}

export interface EgressResponse {
  readonly status: number;
  readonly headers: Dispatcher.ResponseData['headers'];
  /** The body as UTF-8 text, at most `maxResponseBytes` bytes of it. */
  readonly text: string;
}

export interface EgressClient {
  readonly policy: EgressPolicy;
  /**
   * One request under the policy. Throws `EgressDeniedError` for a refused destination,
   * `ResponseTooLargeError` past the byte cap, undici's errors for the rest.
   */
  fetch(url: URL, init?: EgressRequest): Promise<EgressResponse>;
}

let undici: Promise<typeof Undici> | undefined;
let undiciLoaded: typeof Undici | undefined;
// undici is CommonJS: its `module.exports` is `default`, in Node and in the bundled `tetraloop`
// command alike (the bundle gives it no named exports). Its types call `default` a smaller
// namespace than `module.exports` is, hence the cast.
const loadUndici = (): Promise<typeof Undici> =>
  (undici ??= import('undici').then((module) => (undiciLoaded = module.default as unknown as typeof Undici)));

/**
 * undici's error classes, to tell its errors apart; undefined before the process's first request
 * (no undici error exists then).
 */
export const undiciErrors = (): typeof Undici.errors | undefined => undiciLoaded?.errors;

export function egressClient(policy: EgressPolicy): EgressClient {
  let agents: { guarded: Dispatcher; open: Dispatcher } | undefined;
  return {
    policy,
    async fetch(url, init = {}) {
      const { Agent, request } = await loadUndici();
      agents ??= { guarded: new Agent({ connect: { lookup: guardedLookup } }), open: new Agent() };
      const { guarded, open } = agents;
      const port = url.port || (url.protocol === 'https:' ? '443' : '80');
      let dispatcher: Dispatcher = open;
      if (!isAllowlisted(policy, url.hostname, port)) {
        checkLiteralAddress(url.hostname);
        dispatcher = guarded;
      }
      const res = await request(url, {
        method: init.method ?? 'GET',
        ...(init.headers ? { headers: init.headers } : {}),
        ...(init.body !== undefined ? { body: init.body } : {}),
        dispatcher,
        ...(init.signal ? { signal: init.signal } : {}),
        ...(init.timeoutMs !== undefined
          ? { headersTimeout: init.timeoutMs, bodyTimeout: init.timeoutMs }
          : {}),
      });
      const text = await readCapped(res.body, res.headers['content-length'], policy.maxResponseBytes);
      return { status: res.statusCode, headers: res.headers, text };
    },
  };
}

/**
 * Reads a body as UTF-8 up to `limit` bytes. A declared `Content-Length` over the limit is refused
 * before anything is read; otherwise the stream is counted as it arrives and destroyed (the
 * connection with it) at the first chunk that passes the limit.
 */
async function readCapped(
  body: Dispatcher.ResponseData['body'],
  contentLength: string | string[] | undefined,
  limit: number,
): Promise<string> {
  const declared = Number(Array.isArray(contentLength) ? contentLength[0] : contentLength);
  if (Number.isFinite(declared) && declared > limit) {
    body.destroy();
    throw new ResponseTooLargeError(limit);
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > limit) {
      body.destroy();
      throw new ResponseTooLargeError(limit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, bytes).toString('utf8');
}
