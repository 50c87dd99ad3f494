/**
 * Server-sent events of one run: replays the stream after `Last-Event-ID`, then follows it live
 * and closes after the run's final event (`run.finished`). Every stream of the process is fed by
 * one `RunEventHub` (a few blocking connections in all), never by a connection of its own.
 */
import type { Response } from 'express';
import type { RunEvent } from '@tetraloop/core/domain';
import type { RunEventHub } from '@tetraloop/core/runs';
import type { RunStore } from '@tetraloop/core/state';
import type { EventsTruncated } from './answers.js';

export interface EventStreamDeps {
  readonly store: RunStore;
  /** Follows the streams of every open event stream of the process. */
  readonly hub: RunEventHub;
  /** How long a stream stays quiet before a keep-alive comment. @defaultValue 15000 */
  readonly keepAliveMs?: number;
}

const FINAL_EVENT = 'run.finished';

/**
 * Whether `e` is the run's final event: a resumed run has one `run.finished` per generation, and
 * only the current generation's ends its stream.
 */
export const isFinalEvent = async (store: RunStore, runId: string, e: RunEvent): Promise<boolean> =>
  e.type === FINAL_EVENT &&
  ((e.data as { generation?: number } | undefined)?.generation ?? 0) >= (await store.generation(runId));

/**
 * Said (without an SSE id, so it moves no `Last-Event-ID`) when the events after `after` and before
 * `next` are no longer stored: a run's stream keeps about `TETRALOOP_RUN_EVENTS_MAX` events.
 */
const truncatedEvent = (runId: string, after: number, next: number): string =>
  `event: lifecycle\ndata: ${JSON.stringify({
    type: 'events.truncated',
    family: 'lifecycle',
    phase: 'update',
    runId,
    data: { after, next },
  } satisfies EventsTruncated)}\n\n`;

/** What a stream does with the run's events as `followRun` reads them. */
export interface RunFollower {
  /**
   * One event, in order; `final` for the current generation's `run.finished` (following ends after
   * it). Answering true stops following.
   */
  event(e: RunEvent, final: boolean): boolean | Promise<boolean>;
  /** The events after `after` and before `next` are no longer stored (the stream's MAXLEN). */
  truncated?(after: number, next: number): void;
  /**
   * Every event read so far has been handed over, and following is about to wait for more (a long
   * replay is read in pages: this comes after each). Answering true stops.
   */
  readAll?(): boolean;
  /** The stream was quiet for `keepAliveMs`. */
  keepAlive(): void;
}

/** How following a run ended. */
export type FollowEnd =
  /** The current generation's `run.finished` was handed over. */
  | 'final'
  /** The follower asked to stop. */
  | 'stopped'
  /** Nothing after `afterSeq`, and the run had already settled: nothing to follow. */
  | 'settled'
  /** The client went away, or Redis did. */
  | 'gone';

/**
 * Follows a run's events after `afterSeq` until its final event, the follower's stop, or the
 * client's leaving. Following starts before the replay reads anything: no event falls between.
 */
export async function followRun(
  deps: EventStreamDeps,
  runId: string,
  afterSeq: number,
  /** The answer being written: its closing (the client gone, or the answer ended) stops following. */
  res: Response,
  follower: RunFollower,
): Promise<FollowEnd> {
  const feed = deps.hub.follow(runId, afterSeq);
  // The response's close, not the request's: a request closes once its body is read.
  res.on('close', () => feed.close());
  try {
    let events = await feed.next(0);
    if (events.length === 0 && (await deps.store.isSettled(runId))) return 'settled';
    // The last event handed over: a first event past it means the ones between were trimmed (MAXLEN).
    let after = afterSeq;
    for (;;) {
      for (const e of events) {
        if (e.seq > after + 1) follower.truncated?.(after, e.seq);
        after = e.seq;
        const final = await isFinalEvent(deps.store, runId, e);
        if (await follower.event(e, final)) return 'stopped';
        if (final) return 'final';
      }
      if (feed.closed) return 'gone';
      if (events.length > 0 && follower.readAll?.()) return 'stopped';
      events = await feed.next(deps.keepAliveMs ?? 15_000);
      if (events.length === 0 && !feed.closed) follower.keepAlive();
    }
  } catch {
    // The client went away or Redis did; either way this stream is over.
    return 'gone';
  } finally {
    feed.close();
  }
}

/** Answers `text/event-stream` and sends the headers at once (a proxy must not buffer it). */
export function openEventStream(res: Response, headers: Record<string, string> = {}): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...headers,
  });
  res.flushHeaders();
}

export async function streamRunEvents(
  deps: EventStreamDeps,
  runId: string,
  afterSeq: number,
  res: Response,
  /** Called as the stream ends, before its last byte goes out (gives back its slot). */
  onEnd?: () => void,
): Promise<void> {
  openEventStream(res);
  try {
    await followRun(deps, runId, afterSeq, res, {
      truncated: (after, next) => res.write(truncatedEvent(runId, after, next)),
      // The SSE event name is the family (lifecycle, plan, node, tool, assistant, usage); `type` says more.
      event: (e) => {
        res.write(`id: ${e.seq}\nevent: ${e.family ?? e.type}\ndata: ${JSON.stringify(e)}\n\n`);
        return false;
      },
      keepAlive: () => res.write(': keep-alive\n\n'),
    });
  } finally {
    onEnd?.();
    res.end();
  }
}
