/** `/v1/runs`: submit, read, wait for, cancel, resume and signal runs, and follow their events. */
import { Router, type Request } from 'express';
import {
  RunRequest,
  type RunDocument,
  type RunService,
  type RunStore,
  type RunWaiter,
} from '@tetraloop/core';
import { z } from 'zod';
import { callerOf } from './caller.js';
import { streamRunEvents, type EventStreamDeps } from './run-events.js';
import { HttpError, zodToHttp } from './http-errors.js';

const RunIdParam = z.uuid();
const SignalName = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}');

export interface RunsRouterDeps extends EventStreamDeps {
  readonly runs: RunService;
  readonly waiter: RunWaiter;
  readonly maxWaitMs: number;
  /** Reads the blobs behind stubs for `?expand=blobs`. */
  readonly store: RunStore;
}

function runIdOf(req: Request): string {
  const parsed = RunIdParam.safeParse(req.params.id);
  if (!parsed.success) throw new HttpError(404, 'run_not_found', 'no such run');
  return parsed.data;
}

const notFound = (): HttpError => new HttpError(404, 'run_not_found', 'no such run');

/** `?expand=blobs`: the document with each stub in `output` and `nodes.*.output` replaced by its content. */
const Expand = z.literal('blobs').optional();

export function runsRouter(deps: RunsRouterDeps): Router {
  const router = Router();
  const WaitQuery = z.strictObject({
    timeoutMs: z.coerce.number().int().min(0).max(deps.maxWaitMs).default(30_000),
    expand: Expand,
  });
  const ReadQuery = z.object({ expand: Expand });
  const answer = (doc: RunDocument, expand: 'blobs' | undefined): Promise<RunDocument> | RunDocument =>
    expand === 'blobs' ? deps.store.blobs.expandDocument(doc) : doc;
  const IdempotencyKey = z.string().min(1).max(255).optional();

  router.post('/', async (req, res) => {
    if (!req.is('application/json')) {
      throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
    }
    const body = RunRequest.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const key = IdempotencyKey.safeParse(req.get('idempotency-key'));
    if (!key.success) throw zodToHttp(key.error, ['headers', 'idempotency-key']);
    const result = await deps.runs.submit(body.data, key.data, { tenant: callerOf(res).tenant });
    res
      .status(202)
      .location(`/v1/runs/${result.runId}`)
      .json({ runId: result.runId, status: result.status, acceptedAt: result.acceptedAt });
  });

  router.get('/:id', async (req, res) => {
    const runId = runIdOf(req);
    const query = ReadQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const doc = await deps.runs.get(runId);
    if (!doc) throw notFound();
    res.json(await answer(doc, query.data.expand));
  });

  router.get('/:id/wait', async (req, res) => {
    const runId = runIdOf(req);
    const query = WaitQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    // Only the answer reads the whole document; the checks before it read two fields.
    const settled = await deps.runs.settled(runId);
    if (settled === null) throw notFound();
    if (!settled) {
      // Waiting never changes the run; a client that goes away just stops waiting.
      const gone = new AbortController();
      res.on('close', () => gone.abort());
      await deps.waiter.wait(
        runId,
        query.data.timeoutMs,
        async () => (await deps.runs.settled(runId)) !== false,
        gone.signal,
      );
    }
    const doc = await deps.runs.get(runId);
    if (!doc) throw notFound();
    res.status(doc.finishedAt !== null ? 200 : 202).json(await answer(doc, query.data.expand));
  });

  router.post('/:id/cancel', async (req, res) => {
    const runId = runIdOf(req);
    const result = await deps.runs.cancel(runId);
    if (!result) throw notFound();
    res.status(202).json({ runId, status: result.status });
  });

  router.post('/:id/resume', async (req, res) => {
    const runId = runIdOf(req);
    const result = await deps.runs.resume(runId);
    if (!result) throw notFound();
    res
      .status(202)
      .location(`/v1/runs/${runId}`)
      .json({ runId, ...result });
  });

  router.post('/:id/signals/:name', async (req, res) => {
    const runId = runIdOf(req);
    const name = SignalName.safeParse(req.params.name);
    if (!name.success) throw zodToHttp(name.error, ['params', 'name']);
    if (
      req.body === undefined &&
      req.get('content-length') !== undefined &&
      req.get('content-length') !== '0'
    ) {
      throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
    }
    const result = await deps.runs.signal(runId, name.data, req.body ?? null);
    if (!result) throw notFound();
    res
      .status(result === 'delivered' ? 202 : 200)
      .json({ runId, signal: name.data, delivered: result === 'delivered' });
  });

  router.get('/:id/events', async (req, res) => {
    const runId = runIdOf(req);
    const doc = await deps.runs.get(runId);
    if (!doc) throw notFound();
    const from = z.coerce
      .number()
      .int()
      .min(0)
      .catch(0)
      .parse(req.get('last-event-id') ?? req.query.after ?? 0);
    await streamRunEvents(deps, runId, from, req, res);
  });

  return router;
}
