/** `/v1/sessions` and `/v1/sources`: messages into session lanes, lanes, transcripts, source events. */
import { Router } from 'express';
import type { Queue, QueueEvents } from 'bullmq';
import {
  InboundEvent,
  SENSE_JOB,
  SESSION_AGENT,
  type MessageResult,
  type RunService,
  type SensePayload,
  type SessionStore,
  type SourceService,
} from '@tetraloop/core';
import { MessageBody, SessionKey, SourceName } from './bodies.js';
import { callerOf } from './caller.js';
import { HttpError, zodToHttp } from './http-errors.js';

export interface SessionsRouterDeps {
  readonly sessionStore: SessionStore;
  readonly sources: SourceService;
  readonly senseQueue: Queue;
  readonly senseEvents: QueueEvents;
  /** Checks the session agent against the ceilings before a message is taken in. */
  readonly runs: RunService;
}

/** How long the API waits for the sense loop to place a message before answering without a run id. */
const PLACE_TIMEOUT_MS = 5000;

function sessionKeyOf(raw: string | undefined): string {
  const parsed = SessionKey.safeParse(raw);
  if (!parsed.success) throw zodToHttp(parsed.error, ['params', 'sessionKey']);
  return parsed.data;
}

export function sessionsRouter(deps: SessionsRouterDeps): Router {
  const router = Router();

  // Messages go through the sense queue (L1); the answer waits for the lane's decision.
  router.post('/sessions/:sessionKey/messages', async (req, res) => {
    const sessionKey = sessionKeyOf(req.params.sessionKey);
    const body = MessageBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    // Messages name no agent: they run the session agent, which must be one the caller may run.
    await deps.runs.checkAgent(callerOf(res).tenant, SESSION_AGENT);
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
    res.status(202).json(placed ?? { sessionKey, queued: true });
  });

  router.get('/sessions/:sessionKey', async (req, res) => {
    const sessionKey = sessionKeyOf(req.params.sessionKey);
    const view = await deps.sessionStore.view(sessionKey);
    if (!view) throw new HttpError(404, 'session_not_found', 'no such session');
    res.json(view);
  });

  router.get('/sessions/:sessionKey/transcript', async (req, res) => {
    const sessionKey = sessionKeyOf(req.params.sessionKey);
    const view = await deps.sessionStore.view(sessionKey);
    if (!view) throw new HttpError(404, 'session_not_found', 'no such session');
    const lines = await deps.sessionStore.transcript(sessionKey);
    const header = { type: 'session', id: sessionKey, createdAt: view.createdAt };
    res.type('application/x-ndjson').send([header, ...lines].map((l) => JSON.stringify(l)).join('\n') + '\n');
  });

  router.post('/sources/:name/events', async (req, res) => {
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
  });

  router.get('/sources', async (_req, res) => {
    res.json({ sources: await deps.sources.statuses() });
  });

  return router;
}
