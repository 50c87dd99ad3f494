/**
 * A run's server-sent events as an async iterator that survives dropped connections: it remembers
 * the id of the last event it yielded and reconnects with `Last-Event-ID`, so the API replays from
 * there — nothing is missed and nothing comes twice. It ends when the API ends the stream (after the
 * run's final `run.finished`, or at once for a settled run with nothing left to send).
 */
import type { StreamEvent } from './types.js';

/** One SSE message: its fields as the server wrote them. */
export interface SseMessage {
  readonly id?: string;
  readonly event?: string;
  readonly data: string;
  /** The server's reconnection delay, in ms (`retry:`). */
  readonly retry?: number;
}

/** Parses one SSE block (the lines between blank lines); a comment-only block (keep-alive) gives none. */
export function parseSseBlock(block: string): SseMessage | undefined {
  let id: string | undefined;
  let event: string | undefined;
  let retry: number | undefined;
  const data: string[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (name === 'id') id = value;
    else if (name === 'event') event = value;
    else if (name === 'data') data.push(value);
    else if (name === 'retry' && /^\d+$/.test(value)) retry = Number(value);
  }
  if (data.length === 0) return undefined;
  return {
    data: data.join('\n'),
    ...(id === undefined ? {} : { id }),
    ...(event === undefined ? {} : { event }),
    ...(retry === undefined ? {} : { retry }),
  };
}

/** The SSE messages of a response body, as they arrive. */
export async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  // The DOM library types a decoder's writable side `BufferSource`, which TypeScript will not pipe
  // a byte stream into (Node's accepts it): the console type-checks this against the DOM's.
  const decoder = new TextDecoderStream() as unknown as TransformStream<Uint8Array, string>;
  const reader = body.pipeThrough(decoder).getReader();
  let buffered = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += value.replace(/\r\n/g, '\n');
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const message = parseSseBlock(buffered.slice(0, end));
        buffered = buffered.slice(end + 2);
        if (message) yield message;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

export interface EventsOptions {
  /** Start after this event id (sequence number): the last one a previous reader saw. */
  readonly lastEventId?: number;
  /** Stops the iterator (it then ends without an error). */
  readonly signal?: AbortSignal;
  /**
   * Wait before reconnecting after a dropped connection, in ms; a `retry:` from the server replaces it.
   * @defaultValue 1000
   */
  readonly retryMs?: number;
  /**
   * Reconnections in a row that may fail (a refused connection, a 503) before the iterator throws;
   * a connection that delivered an event starts the count again.
   * @defaultValue 5
   */
  readonly maxRetries?: number;
}

/** What the iterator needs of the client: one request for the stream after an id. */
export type OpenStream = (
  lastEventId: number | undefined,
  signal: AbortSignal | undefined,
) => Promise<ReadableStream<Uint8Array>>;

/** Whether a failure to open the stream is worth another try (the API busy or away), and after how long. */
export type RetryPolicy = (err: unknown) => { retry: boolean; afterMs?: number };

const sleep = (ms: number, signal: AbortSignal | undefined): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * Follows a stream opened by `open`, reconnecting after the id of the last event yielded whenever
 * the connection drops before the server ended it.
 */
export async function* followEvents(
  open: OpenStream,
  retryable: RetryPolicy,
  options: EventsOptions = {},
): AsyncGenerator<StreamEvent> {
  const { signal } = options;
  let lastEventId = options.lastEventId;
  let retryMs = options.retryMs ?? 1000;
  const maxRetries = options.maxRetries ?? 5;
  let failures = 0;
  while (!signal?.aborted) {
    let body: ReadableStream<Uint8Array>;
    try {
      body = await open(lastEventId, signal);
    } catch (err) {
      if (signal?.aborted) return;
      const decision = retryable(err);
      if (!decision.retry || ++failures > maxRetries) throw err;
      await sleep(decision.afterMs ?? retryMs, signal);
      continue;
    }
    try {
      for await (const message of sseMessages(body)) {
        if (message.retry !== undefined) retryMs = message.retry;
        const event = JSON.parse(message.data) as StreamEvent;
        if (message.id !== undefined) lastEventId = Number(message.id);
        failures = 0;
        yield event;
      }
      // The server ended the stream: the run finished, or there is nothing left to send.
      return;
    } catch (err) {
      if (signal?.aborted) return;
      if (err instanceof SyntaxError) throw err;
      // The connection dropped mid-stream: resume after the last event yielded.
      if (++failures > maxRetries) throw err;
      await sleep(retryMs, signal);
    }
  }
}
