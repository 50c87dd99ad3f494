/**
 * `POST /v1/events`: an event of the caller's tenant, taken once per id within the dedupe window
 * and handed to the sense loop, which starts the runs of the triggers listening for it
 * (docs/triggers.md). The answer says only whether it was taken: which runs it starts is decided
 * after it.
 */
import type { RequestHandler } from 'express';
import type { EventIntake } from '@tetraloop/core/triggers';
import type { EventAccepted } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { EventBody } from './requests.js';
import type { RouteName } from './route-table.js';

export interface EventsRouterDeps {
  readonly events: EventIntake;
  /** Largest `payload`, as JSON in UTF-8 bytes. */
  readonly eventPayloadMaxBytes: number;
}

/** Refuses (400 at `payload`) a payload larger than the deployment takes. */
export function checkPayloadSize(payload: unknown, maxBytes: number, path = 'payload'): void {
  if (payload === undefined) return;
  const bytes = Buffer.byteLength(JSON.stringify(payload), 'utf8');
  if (bytes > maxBytes) {
    throw new HttpError(400, 'invalid_request', 'the request is invalid', [
      { path, message: `is ${bytes} bytes as JSON; at most ${maxBytes} (TETRALOOP_EVENT_PAYLOAD_MAX_BYTES)` },
    ]);
  }
}

export function eventHandlers(deps: EventsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const send: RequestHandler = async (req, res) => {
    if (!req.is('application/json')) {
      throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
    }
    const body = EventBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    checkPayloadSize(body.data.payload, deps.eventPayloadMaxBytes);
    const accepted = await deps.events.send(callerOf(res).tenant, body.data);
    res.status(202).json(accepted satisfies EventAccepted);
  };
  return { 'events.send': send };
}
