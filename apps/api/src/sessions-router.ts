/**
 * `/v1/sessions` and `/v1/sources`: messages into session lanes, lanes, transcripts, source events.
 * A session key names a session of the caller's tenant: it is stored tenant-scoped, and answers
 * show it as the client named it.
 */
import type { RequestHandler, Response } from 'express';
import type { Queue, QueueEvents } from 'bullmq';
import {
  InboundEvent,
  SENSE_JOB,
  scopedName,
  unscopeName,
  type MessageResult,
  type SensePayload,
  type SessionStore,
  type SourceService,
} from '@tetraloop/core';
import { MessageBody, SessionKey, SourceName } from './bodies.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import type { RouteName } from './route-table.js';

export interface SessionsRouterDeps {
  readonly sessionStore: SessionStore;
  readonly sources: SourceService;
  readonly senseQueue: Queue;
  readonly senseEvents: QueueEvents;
}

/** How long the API waits for the sense loop to place a message before answering without a run id. */
const PLACE_TIMEOUT_MS = 5000;

/** The session the request names, within the caller's tenant: as the client names it and as stored. */
function sessionOf(raw: unknown, res: Response): { name: string; stored: string } {
  const parsed = SessionKey.safeParse(raw);
  if (!parsed.success) throw zodToHttp(parsed.error, ['params', 'sessionKey']);
  return { name: parsed.data, stored: scopedName(callerOf(res).tenant, parsed.data) };
}

/** An answer naming a stored session key, with the key as the client named it. */
const outward = <T extends { sessionKey?: string }>(value: T): T =>
  value.sessionKey === undefined ? value : { ...value, sessionKey: unscopeName(value.sessionKey).name };

export function sessionHandlers(deps: SessionsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  // Messages go through the sense queue (L1); the answer waits for the lane's decision.
  const message: RequestHandler = async (req, res) => {
    const { name, stored: sessionKey } = sessionOf(req.params.sessionKey, res);
    const body = MessageBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const job = await deps.senseQueue.add(
      SENSE_JOB.message,
      { sessionKey, message: body.data } satisfies SensePayload<typeof SENSE_JOB.message>,
      { removeOnComplete: { age: 60 }, removeOnFail: { age: 3600 } },
    );
    let placed: MessageResult | undefined;
    try {
      placed = (await job.waitUntilFinished(deps.senseEvents, PLACE_TIMEOUT_MS)) as MessageResult;
    } catch {
      // Either the sense loop failed the message, or it has not answered yet.
      if ((await job.getState()) === 'failed') {
        const failed = await deps.senseQueue.getJob(job.id!);
        throw new HttpError(422, 'message_failed', failed?.failedReason ?? 'the message could not be placed');
      }
    }
    res.status(202).json(placed ? outward(placed) : { sessionKey: name, queued: true });
  };

  const get: RequestHandler = async (req, res) => {
    const { stored } = sessionOf(req.params.sessionKey, res);
    const view = await deps.sessionStore.view(stored);
    if (!view) throw new HttpError(404, 'session_not_found', 'no such session');
    res.json(outward(view));
  };

  const transcript: RequestHandler = async (req, res) => {
    const { name, stored } = sessionOf(req.params.sessionKey, res);
    const view = await deps.sessionStore.view(stored);
    if (!view) throw new HttpError(404, 'session_not_found', 'no such session');
    const lines = await deps.sessionStore.transcript(stored);
    const header = { type: 'session', id: name, createdAt: view.createdAt };
    res.type('application/x-ndjson').send([header, ...lines].map((l) => JSON.stringify(l)).join('\n') + '\n');
  };

  const sourceEvent: RequestHandler = async (req, res) => {
    const name = SourceName.safeParse(req.params.name);
    if (!name.success) throw zodToHttp(name.error, ['params', 'name']);
    const event = InboundEvent.safeParse(req.body);
    if (!event.success) throw zodToHttp(event.error);
    await deps.senseQueue.add(
      SENSE_JOB.event,
      { source: name.data, event: event.data } satisfies SensePayload<typeof SENSE_JOB.event>,
      { removeOnComplete: { age: 60 }, removeOnFail: { age: 3600 } },
    );
    res.status(202).json({ source: name.data, accepted: true });
  };

  const sources: RequestHandler = async (_req, res) => {
    res.json({ sources: await deps.sources.statuses() });
  };

  return {
    'sessions.message': message,
    'sessions.get': get,
    'sessions.transcript': transcript,
    'sources.event': sourceEvent,
    'sources.list': sources,
  };
}
