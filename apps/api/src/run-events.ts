/**
 * Server-sent events of one run: replays the stream after `Last-Event-ID`, then follows it live
 * and closes after the run's final event (`run.finished`).
 */
import type { Request, Response } from 'express';
import type { Redis } from 'ioredis';
import type { RunEvent, RunStore } from '@tetraloop/core';

export interface EventStreamDeps {
  readonly store: RunStore;
  readonly blockingConnection: () => Redis;
  /** How long one blocking read waits before a keep-alive comment. @defaultValue 15000 */
  readonly eventsBlockMs?: number;
}

const FINAL_EVENT = 'run.finished';

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
  })}\n\n`;

export async function streamRunEvents(
  deps: EventStreamDeps,
  runId: string,
  afterSeq: number,
  req: Request,
  res: Response,
): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();
  let open = true;
  let connection: Redis | undefined;
  req.on('close', () => {
    open = false;
    connection?.disconnect();
  });
  // A resumed run has one run.finished per generation; only the current generation's ends the stream.
  const isFinal = async (e: RunEvent): Promise<boolean> =>
    e.type === FINAL_EVENT &&
    ((e.data as { generation?: number } | undefined)?.generation ?? 0) >=
      (await deps.store.generation(runId));
  try {
    let after = afterSeq;
    let events = await deps.store.events(runId, after);
    // Nothing after the given id and the run already settled: there is nothing left to follow.
    if (events.length === 0 && (await deps.store.isSettled(runId))) return;
    for (;;) {
      for (const e of events) {
        if (e.seq > after + 1) res.write(truncatedEvent(runId, after, e.seq));
        after = e.seq;
        // The SSE event name is the family (lifecycle, plan, node, tool, assistant, usage); `type` says more.
        res.write(`id: ${e.seq}\nevent: ${e.family ?? e.type}\ndata: ${JSON.stringify(e)}\n\n`);
        if (await isFinal(e)) return;
      }
      if (!open) return;
      connection ??= deps.blockingConnection();
      events = await deps.store.waitForEvents(connection, runId, after, deps.eventsBlockMs ?? 15_000);
      if (events.length === 0) res.write(': keep-alive\n\n');
    }
  } catch {
    // The client went away or Redis did; either way this stream is over.
  } finally {
    res.end();
    connection?.disconnect();
  }
}
