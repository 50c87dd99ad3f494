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
  const send = (e: RunEvent): boolean => {
    res.write(`id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
    return e.type === FINAL_EVENT;
  };
  try {
    let after = afterSeq;
    let events = await deps.store.events(runId, after);
    for (;;) {
      for (const e of events) {
        after = e.seq;
        if (send(e)) return;
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
