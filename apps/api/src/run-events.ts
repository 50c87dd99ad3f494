/**
 * Server-sent events of one run: replays the stream after `Last-Event-ID`, then follows it live
 * and closes after the run's final event (`run.finished`). Every stream of the process is fed by
 * one `RunEventHub` (a few blocking connections in all), never by a connection of its own.
 */
import type { Request, Response } from 'express';
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

export async function streamRunEvents(
  deps: EventStreamDeps,
  runId: string,
  afterSeq: number,
  req: Request,
  res: Response,
  /** Called as the stream ends, before its last byte goes out (gives back its slot). */
  onEnd?: () => void,
): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();
  // Following starts before the replay reads anything: no event falls between the two.
  const feed = deps.hub.follow(runId, afterSeq);
  req.on('close', () => feed.close());
  try {
    let events = await feed.next(0);
    // Nothing after the given id and the run already settled: there is nothing left to follow.
    if (events.length === 0 && (await deps.store.isSettled(runId))) return;
    // The last event sent: a first event past it means the ones between were trimmed (MAXLEN).
    let after = afterSeq;
    for (;;) {
      for (const e of events) {
        if (e.seq > after + 1) res.write(truncatedEvent(runId, after, e.seq));
        after = e.seq;
        // The SSE event name is the family (lifecycle, plan, node, tool, assistant, usage); `type` says more.
        res.write(`id: ${e.seq}\nevent: ${e.family ?? e.type}\ndata: ${JSON.stringify(e)}\n\n`);
        if (await isFinalEvent(deps.store, runId, e)) return;
      }
      if (feed.closed) return;
      events = await feed.next(deps.keepAliveMs ?? 15_000);
      if (events.length === 0 && !feed.closed) res.write(': keep-alive\n\n');
    }
  } catch {
    // The client went away or Redis did; either way this stream is over.
  } finally {
    feed.close();
    onEnd?.();
    res.end();
  }
}
