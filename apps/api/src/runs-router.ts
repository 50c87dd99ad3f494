/**
 * `/v1/runs`: submit, read, wait for, cancel, resume, rerun and signal runs, and follow their
 * events. A run of another tenant is answered as no run at all.
 */
import type { Request, RequestHandler, Response } from 'express';
import {
  hasScope,
  BudgetDecision,
  isBudgetSignal,
  unscopeName,
  type SignalLimits,
  type SignalRefusal,
  type RunDocument,
} from '@tetraloop/core/domain';
import type { DirectoryArchive } from '@tetraloop/core/archive';
import type { AcceptBarrier, AcceptShortfall } from '@tetraloop/core/durability';
import { RunRequest, type RunService, type RunWaiter } from '@tetraloop/core/runs';
import type { RunStore } from '@tetraloop/core/state';
import { metrics } from '@tetraloop/core/telemetry';
import type {
  RerunAccepted,
  RunAccepted,
  RunCancelled,
  RunResumed,
  SignalDelivered,
  SignalRepeated,
} from './answers.js';
import { streamRunEvents, type EventStreamDeps } from './run-events.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import type { LongRequests } from './long-requests.js';
import {
  EventCursor,
  EventsQuery,
  IdempotencyKey,
  ReadQuery,
  RerunBody,
  RunIdParam,
  SignalName,
  SignalPayload,
  waitQuery,
} from './requests.js';
import type { RouteName } from './route-table.js';

/** The status each refusal of a signal answers with. */
export function refusalStatus(code: SignalRefusal): number {
  switch (code) {
    case 'signal_not_awaited':
    case 'run_finished':
    case 'budget_not_raised':
      return 409;
    case 'signal_too_large':
      return 413;
    case 'too_many_signals':
      return 429;
  }
}

export interface RunsRouterDeps extends EventStreamDeps {
  readonly runs: RunService;
  readonly waiter: RunWaiter;
  readonly maxWaitMs: number;
  /** Reads the blobs behind stubs for `?expand=blobs`. */
  readonly store: RunStore;
  /** Caps on each run's signals. */
  readonly signalLimits: SignalLimits;
  /** Caps on open event streams and waits, per process and per tenant. */
  readonly longRequests: LongRequests;
  /** What an accepted run waits for (replicas, the AOF) before `202`; nothing when absent. */
  readonly acceptBarrier?: AcceptBarrier;
  /** Where a run whose Redis record expired is read from (`TETRALOOP_ARCHIVE_DIR`); absent: nowhere. */
  readonly archive?: DirectoryArchive;
}

/** Seconds a client is told to wait before it retries an accept that was not confirmed. */
const UNCONFIRMED_RETRY_AFTER_SECONDS = 1;

/** The `503` of an accepted run whose durability was not confirmed in time. */
function unconfirmed(runId: string, shortfall: AcceptShortfall, waitMs: number): HttpError {
  const retry = 'retry with the same Idempotency-Key to confirm it (the retry finds this run)';
  switch (shortfall.code) {
    case 'not_replicated':
      return new HttpError(
        503,
        shortfall.code,
        `run ${runId} is stored and queued, but ${shortfall.acknowledged} of the ${shortfall.wanted} replicas TETRALOOP_ACCEPT_WAIT_REPLICAS asks for acknowledged it within ${waitMs} ms; ${retry}`,
      );
    case 'not_persisted':
      return new HttpError(
        503,
        shortfall.code,
        `run ${runId} is stored and queued, but Redis did not confirm it fsynced to its AOF (TETRALOOP_ACCEPT_WAITAOF) within ${waitMs} ms; ${retry}`,
      );
  }
}

/**
 * Waits for what an accepted run must wait for (replicas, the AOF) before it is answered as
 * accepted; throws the `503` when that is not confirmed. Called after the create and the enqueue:
 * every write of the accept is before the barrier's.
 */
export async function confirmAccept(barrier: AcceptBarrier | undefined, runId: string): Promise<void> {
  const shortfall = await barrier?.confirm();
  if (!shortfall) return;
  metrics.acceptsUnconfirmed.inc({ code: shortfall.code });
  throw unconfirmed(runId, shortfall, barrier!.durability.waitMs);
}

/**
 * Answers an accepted run (a submit, a rerun, a schedule run now): `202` with its `Location` once
 * the accept barrier confirmed it; otherwise its `503`, with `Retry-After` and the same `Location`.
 */
export async function answerAccepted(
  res: Response,
  barrier: AcceptBarrier | undefined,
  accepted: RunAccepted | RerunAccepted,
): Promise<void> {
  try {
    await confirmAccept(barrier, accepted.runId);
  } catch (err) {
    if (err instanceof HttpError) {
      res.set('Retry-After', String(UNCONFIRMED_RETRY_AFTER_SECONDS)).location(`/v1/runs/${accepted.runId}`);
    }
    throw err;
  }
  res.status(202).location(`/v1/runs/${accepted.runId}`).json(accepted);
}

/** A run document as its client sees it: a session run names its session as the client does. */
export const clientView = (doc: RunDocument): RunDocument =>
  doc.sessionKey ? { ...doc, sessionKey: unscopeName(doc.sessionKey).name } : doc;

export const runNotFound = (): HttpError => new HttpError(404, 'run_not_found', 'no such run');

/** A body route takes JSON only: anything else is answered 415 before it is read. */
function requireJson(req: Request): void {
  if (!req.is('application/json')) {
    throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
  }
}

function runIdOf(req: Request): string {
  const parsed = RunIdParam.safeParse(req.params.id);
  if (!parsed.success) throw runNotFound();
  return parsed.data;
}

/** The run id of the request, once the run is known to belong to the caller's tenant. */
export async function ownRunId(store: RunStore, req: Request, res: Response): Promise<string> {
  const runId = runIdOf(req);
  if ((await store.tenantOf(runId)) !== callerOf(res).tenant) throw runNotFound();
  return runId;
}

export function runHandlers(deps: RunsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const WaitQuery = waitQuery(deps.maxWaitMs);
  const answer = async (doc: RunDocument, expand: 'blobs' | undefined): Promise<RunDocument> => {
    const shown = clientView(doc);
    return expand === 'blobs' ? deps.store.blobs.expandDocument(shown) : shown;
  };

  const ownRun = (req: Request, res: Response): Promise<string> => ownRunId(deps.store, req, res);

  const idempotencyKeyOf = (req: Request): string | undefined => {
    const key = IdempotencyKey.safeParse(req.get('idempotency-key'));
    if (!key.success) throw zodToHttp(key.error, ['headers', 'idempotency-key']);
    return key.data;
  };

  const submit: RequestHandler = async (req, res) => {
    requireJson(req);
    const body = RunRequest.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const key = idempotencyKeyOf(req);
    const result = await deps.runs.submit(body.data, key, { tenant: callerOf(res).tenant });
    await answerAccepted(res, deps.acceptBarrier, {
      runId: result.runId,
      status: result.status,
      acceptedAt: result.acceptedAt,
    });
  };

  const rerun: RequestHandler = async (req, res) => {
    const runId = await ownRun(req, res);
    requireJson(req);
    const body = RerunBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const result = await deps.runs.rerun(runId, body.data.from, {
      tenant: callerOf(res).tenant,
      idempotencyKey: idempotencyKeyOf(req),
    });
    if (!result) throw runNotFound();
    await answerAccepted(res, deps.acceptBarrier, {
      runId: result.runId,
      status: result.status,
      acceptedAt: result.acceptedAt,
      rerunOf: result.rerunOf,
    } satisfies RerunAccepted);
  };

  const get: RequestHandler = async (req, res) => {
    const runId = runIdOf(req);
    const query = ReadQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const { tenant } = callerOf(res);
    const doc = (await deps.runs.get(runId)) ?? (await archived(runId, tenant));
    if (!doc || doc.tenant !== tenant) throw runNotFound();
    res.json(await answer(doc, query.data.expand));
  };

  /** A run no longer in Redis, from the archive: its document as archived (blobs read in). */
  const archived = async (runId: string, tenant: string): Promise<RunDocument | null> => {
    const record = await deps.archive?.run(runId, tenant);
    return record ? { ...record.run, archivedAt: record.archivedAt } : null;
  };

  const wait: RequestHandler = async (req, res) => {
    const query = WaitQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const runId = await ownRun(req, res);
    const { abortOnDisconnect } = query.data;
    // Cancelling is writing: a read-only key may wait, not cancel by going away.
    if (abortOnDisconnect && !hasScope(callerOf(res), 'runs:write')) {
      throw new HttpError(
        403,
        'forbidden',
        'abortOnDisconnect cancels the run: the API key lacks the scope runs:write',
      );
    }
    // Only the answer reads the whole document; the checks before it read two fields.
    const settled = await deps.runs.settled(runId);
    if (settled === null) throw runNotFound();
    if (!settled) {
      // Only a request that will wait holds a slot; one for a settled run answers at once. The
      // slot is given back before the answer goes out.
      const release = deps.longRequests.admit('wait', res);
      // A client that goes away stops waiting; the run goes on, unless it asked to cancel it then.
      const gone = new AbortController();
      res.on('close', () => gone.abort());
      try {
        await deps.waiter.wait(
          runId,
          query.data.timeoutMs,
          async () => (await deps.runs.settled(runId)) !== false,
          gone.signal,
        );
      } finally {
        release();
      }
      if (abortOnDisconnect && gone.signal.aborted && !res.writableFinished) {
        if ((await deps.runs.settled(runId)) === false) {
          await deps.runs.cancel(runId);
        }
        return;
      }
    }
    const doc = await deps.runs.get(runId);
    if (!doc) throw runNotFound();
    res.status(doc.finishedAt !== null ? 200 : 202).json(await answer(doc, query.data.expand));
  };

  const cancel: RequestHandler = async (req, res) => {
    const runId = await ownRun(req, res);
    const result = await deps.runs.cancel(runId);
    if (!result) throw runNotFound();
    res.status(202).json({ runId, status: result.status } satisfies RunCancelled);
  };

  const resume: RequestHandler = async (req, res) => {
    const runId = await ownRun(req, res);
    const result = await deps.runs.resume(runId);
    if (!result) throw runNotFound();
    res
      .status(202)
      .location(`/v1/runs/${runId}`)
      .json({ runId, ...result } satisfies RunResumed);
  };

  const signal: RequestHandler = async (req, res) => {
    const name = SignalName.safeParse(req.params.name);
    if (!name.success) throw zodToHttp(name.error, ['params', 'name']);
    const runId = await ownRun(req, res);
    if (
      req.body === undefined &&
      req.get('content-length') !== undefined &&
      req.get('content-length') !== '0'
    ) {
      throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
    }
    // A budget decision raises the run's money budget or stops it; anything else is refused here.
    if (isBudgetSignal(name.data)) {
      const budget = BudgetDecision.safeParse(req.body ?? null);
      if (!budget.success) throw zodToHttp(budget.error, ['body']);
    }
    const caller = callerOf(res);
    const decision = { keyId: caller.keyId, tenant: caller.tenant, at: new Date().toISOString() };
    const payload = SignalPayload.parse(req.body ?? null);
    const result = await deps.runs.signal(runId, name.data, payload, decision, deps.signalLimits);
    if (result.outcome === 'unknown_run') throw runNotFound();
    if (result.outcome === 'refused') {
      const issues = result.limit === undefined ? [] : [{ path: 'body', message: `limit: ${result.limit}` }];
      throw new HttpError(refusalStatus(result.code), result.code, result.message, issues);
    }
    if (result.outcome === 'delivered') {
      res
        .status(202)
        .json({ runId, signal: name.data, delivered: true, decidedBy: decision } satisfies SignalDelivered);
    } else {
      res.status(200).json({ runId, signal: name.data, delivered: false } satisfies SignalRepeated);
    }
  };

  const events: RequestHandler = async (req, res) => {
    const runId = await ownRun(req, res);
    const from = EventCursor.parse(req.get('last-event-id') ?? EventsQuery.parse(req.query).after);
    const release = deps.longRequests.admit('events', res);
    await streamRunEvents(deps, runId, from, res, release);
  };

  return {
    'runs.submit': submit,
    'runs.get': get,
    'runs.wait': wait,
    'runs.cancel': cancel,
    'runs.resume': resume,
    'runs.rerun': rerun,
    'runs.signal': signal,
    'runs.events': events,
  };
}
