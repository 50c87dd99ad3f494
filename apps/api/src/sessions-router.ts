/**
 * `/v1/sessions` and `/v1/sources`: messages into session lanes, the tenant's sessions, lanes,
 * transcripts, source events.
 * A session key names a session of the caller's tenant: it is stored tenant-scoped, and answers
 * show it as the client named it.
 */
import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import type { Queue, QueueEvents } from 'bullmq';
import { scopedName, unscopeName } from '@tetraloop/core/domain';
import { decodeCursor, encodeCursor } from '@tetraloop/core/insight';
import type { RunService } from '@tetraloop/core/runs';
import type { EventIntake } from '@tetraloop/core/triggers';
import {
  InboundEvent,
  SENSE_JOB,
  type WebhookSettings,
  SESSION_AGENT,
  type MessageResult,
  type SensePayload,
  type SourceService,
} from '@tetraloop/core/sessions';
import type { SessionStore } from '@tetraloop/core/state';
import { WEBHOOK_SIGNATURE_HEADER, verifyWebhookSignature } from '@tetraloop/core/webhooks';
import type {
  MessageAnswer,
  SessionPage,
  SourceEventAccepted,
  SourceList,
  TranscriptHeader,
} from './answers.js';
import {
  IdempotencyKey,
  MessageBody,
  SessionKey,
  SessionListQuery,
  SourceName,
  TranscriptQuery,
} from './requests.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { checkPayloadSize } from './events-router.js';
import { waitForJob } from './job-wait.js';
import type { RouteName } from './route-table.js';

/** What a cursor of the session list names: a session key as stored (tenant-scoped). */
const STORED_SESSION = /^(?:[a-z0-9][a-z0-9-]{0,39}~)?[A-Za-z0-9:_.@-]{1,128}$/;

export interface SessionsRouterDeps {
  readonly sessionStore: SessionStore;
  readonly sources: SourceService;
  readonly senseQueue: Queue;
  readonly senseEvents: QueueEvents;
  readonly webhooks: WebhookSettings;
  /** Checks the session agent against the ceilings before a message is taken in. */
  readonly runs: RunService;
  /**
   * How long the API waits for the sense loop to place a message before answering without a run
   * id (`TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS`). @defaultValue 5000
   */
  readonly placeTimeoutMs?: number;
  /** Where a source configured with `event` sends its events for triggers. */
  readonly events: EventIntake;
  readonly eventPayloadMaxBytes: number;
}

/** A request whose JSON body's raw bytes were kept (by the JSON parser's `verify`). */
export type RawBodyRequest = Request & { rawBody?: Buffer };

/** The session the request names, within the caller's tenant: as the client names it and as stored. */
function sessionOf(raw: unknown, res: Response): SessionName {
  const parsed = SessionKey.safeParse(raw);
  if (!parsed.success) throw zodToHttp(parsed.error, ['params', 'sessionKey']);
  return { name: parsed.data, stored: scopedName(callerOf(res).tenant, parsed.data) };
}

/** An answer naming a stored session key, with the key as the client named it. */
const outward = <T extends { sessionKey?: string }>(value: T): T =>
  value.sessionKey === undefined ? value : { ...value, sessionKey: unscopeName(value.sessionKey).name };

/** A message naming another agent than the one its session is bound to. */
const agentConflict = (session: string, bound: string, asked: string): HttpError =>
  new HttpError(
    409,
    'session_agent_conflict',
    `session "${session}" runs agent "${bound}" (bound by its first message), not "${asked}": send it without agentId, or use another session`,
    [{ path: 'agentId', message: `the session's agent is "${bound}"` }],
  );

/** A session of the caller's tenant: as the client names it and as stored. */
export interface SessionName {
  readonly name: string;
  readonly stored: string;
}

/**
 * Takes a message into a session (through the sense queue) and answers with the lane's decision,
 * as far as it came within the place timeout. Refusals are `HttpError`s (`409`, `422`, `429`).
 */
export async function placeMessage(
  deps: SessionsRouterDeps,
  tenant: string,
  session: SessionName,
  body: MessageBody,
  eventId: string | undefined,
  /** Outside data the run is handed as delimited blocks, never as the message's text. */
  data?: readonly string[],
): Promise<MessageAnswer> {
  const { name, stored: sessionKey } = session;
  // The session's agent: bound by its first message (the message's, else `main`). A message
  // naming another agent than the bound one is refused; the agent must be one the caller may run.
  const bound = await deps.sessionStore.agent(sessionKey);
  if (bound !== null && body.agentId !== undefined && body.agentId !== bound) {
    throw agentConflict(name, bound, body.agentId);
  }
  const agentId = bound ?? body.agentId ?? SESSION_AGENT;
  await deps.runs.checkAgent(tenant, agentId);
  deps.runs.checkModel(tenant, { agentId, model: body.model });
  const job = await deps.senseQueue.add(
    SENSE_JOB.message,
    {
      sessionKey,
      message: { ...body, ...(eventId === undefined ? {} : { eventId }) },
      // Every handling of this job (a redelivery after a crash) finds the run the first stored.
      deliveryId: randomUUID(),
      ...(data?.length ? { data: [...data] } : {}),
    } satisfies SensePayload<typeof SENSE_JOB.message>,
    { removeOnComplete: { age: 60 }, removeOnFail: { age: 3600 } },
  );
  const outcome = await waitForJob(deps.senseQueue, deps.senseEvents, job.id!, deps.placeTimeoutMs ?? 5000);
  if (outcome.state === 'failed') {
    throw new HttpError(422, 'message_failed', outcome.reason || 'the message could not be placed');
  }
  const placed = outcome.state === 'completed' ? (outcome.value as MessageResult) : undefined;
  if (placed?.refused?.code === 'agent_conflict') {
    throw agentConflict(name, placed.refused.agentId, body.agentId ?? SESSION_AGENT);
  }
  if (placed?.refused) {
    const { limit } = placed.refused;
    throw new HttpError(
      429,
      'lane_full',
      `session "${name}" has ${limit} runs waiting in its lane, its most (TETRALOOP_FOLLOWUP_CAP = ${limit}); nothing was stored: send it again once one has started, or with mode "collect" or "steer"`,
      [{ path: 'mode', message: `limit: ${limit}` }],
    );
  }
  return placed ? outward(placed) : { sessionKey: name, queued: true };
}

export function sessionHandlers(deps: SessionsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  // Messages go through the sense queue (L1); the answer waits for the lane's decision.
  const message: RequestHandler = async (req, res) => {
    const session = sessionOf(req.params.sessionKey, res);
    const body = MessageBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    // An Idempotency-Key is the message's id, as its eventId is: a retry with it is seen as one.
    const key = IdempotencyKey.safeParse(req.get('idempotency-key'));
    if (!key.success) throw zodToHttp(key.error, ['headers', 'idempotency-key']);
    if (key.data !== undefined && body.data.eventId !== undefined && key.data !== body.data.eventId) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        { path: 'headers.idempotency-key', message: 'differs from the eventId of the body' },
      ]);
    }
    const eventId = body.data.eventId ?? key.data;
    const answer = await placeMessage(deps, callerOf(res).tenant, session, body.data, eventId);
    res.status(202).json(answer);
  };

  const list: RequestHandler = async (req, res) => {
    const query = SessionListQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const cursor = query.data.cursor === undefined ? null : decodeCursor(query.data.cursor, STORED_SESSION);
    if (cursor === undefined) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        { path: 'query.cursor', message: 'not a cursor this API handed out (nextCursor of an earlier page)' },
      ]);
    }
    const page = await deps.sessionStore.list(callerOf(res).tenant, query.data.limit, cursor);
    const answer: SessionPage = {
      sessions: page.sessions.map(outward),
      nextCursor: page.nextCursor ? encodeCursor(page.nextCursor) : null,
    };
    res.json(answer);
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
    const query = TranscriptQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const { after, limit } = query.data;
    const page = await deps.sessionStore.transcriptPage(stored, after === undefined ? 0 : after + 1, limit);
    const last = page.from + page.lines.length - 1;
    // Lines are numbered for the session's life; `first` > 0 when the oldest were dropped by the cap.
    const header: TranscriptHeader = {
      type: 'session',
      id: name,
      createdAt: view.createdAt,
      first: page.first,
      from: page.from,
      length: page.length,
      next: last + 1 < page.length ? last : null,
    };
    res
      .type('application/x-ndjson')
      .send([header, ...page.lines].map((l) => JSON.stringify(l)).join('\n') + '\n');
  };

  // A webhook: a configured source, a signed body seen once, a session the source may reach.
  const webhooks = new Map(deps.webhooks.sources.map((s) => [s.name, s]));
  const sourceEvent: RequestHandler = async (req: RawBodyRequest, res) => {
    const name = SourceName.safeParse(req.params.name);
    if (!name.success) throw zodToHttp(name.error, ['params', 'name']);
    const source = webhooks.get(name.data);
    if (!source)
      throw new HttpError(404, 'source_not_found', `no webhook source "${name.data}" is configured`);
    if (!req.is('application/json') || req.rawBody === undefined) {
      throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
    }
    const { toleranceSeconds } = deps.webhooks;
    const checked = verifyWebhookSignature(req.get(WEBHOOK_SIGNATURE_HEADER), source.secret, req.rawBody, {
      nowSeconds: Math.floor(Date.now() / 1000),
      toleranceSeconds,
    });
    if (!checked.ok) throw new HttpError(401, checked.code, checked.message);
    const event = InboundEvent.safeParse(req.body);
    if (!event.success) throw zodToHttp(event.error);
    if (source.event) checkPayloadSize(event.data.payload, deps.eventPayloadMaxBytes);
    const sessionKey = event.data.sessionKey;
    if (source.sessions && (sessionKey === undefined || !source.sessions.includes(sessionKey))) {
      throw new HttpError(
        403,
        'session_not_allowed',
        `source "${source.name}" may only send events for its sessions: ${source.sessions.join(', ')}`,
        [{ path: 'sessionKey', message: "not one of the source's sessions" }],
      );
    }
    // Last, so a refused request does not use its signature up. Remembered as long as it could pass.
    if (!(await deps.sources.firstSignature(source.name, checked.t, checked.v1, 2 * toleranceSeconds + 1))) {
      throw new HttpError(
        409,
        'webhook_replayed',
        'this signature was accepted before; sign each delivery anew',
      );
    }
    await deps.senseQueue.add(
      SENSE_JOB.event,
      { source: source.name, event: event.data, tenant: source.tenant } satisfies SensePayload<
        typeof SENSE_JOB.event
      >,
      { removeOnComplete: { age: 60 }, removeOnFail: { age: 3600 } },
    );
    // A source configured with `event` also starts its tenant's triggers; its event ids are its
    // own, apart from every other sender's.
    if (source.event) {
      const { eventId, payload } = event.data;
      await deps.events.send(
        source.tenant,
        {
          name: source.event,
          ...(payload !== undefined ? { payload } : {}),
          ...(eventId !== undefined ? { id: `${source.name}/${eventId}` } : {}),
        },
        source.name,
      );
    }
    res.status(202).json({ source: source.name, accepted: true } satisfies SourceEventAccepted);
  };

  // Each source is its configured tenant's (a webhook's or a polled source's `tenant`): its status
  // keeps the tenant, and a tenant sees only its own.
  const sources: RequestHandler = async (_req, res) => {
    res.json({ sources: await deps.sources.statuses(callerOf(res).tenant) } satisfies SourceList);
  };

  return {
    'sessions.message': message,
    'sessions.list': list,
    'sessions.get': get,
    'sessions.transcript': transcript,
    'sources.event': sourceEvent,
    'sources.list': sources,
  };
}
