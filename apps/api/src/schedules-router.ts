/**
 * Each tenant's schedules over HTTP: make, list, read, change, delete, and run one now. The
 * schedule service keeps them and their BullMQ job schedulers; another tenant's schedule, or a
 * malformed id, is `404 schedule_not_found`.
 */
import type { Request, RequestHandler } from 'express';
import { OriginId } from '@tetraloop/core/domain';
import { ScheduleRequest, SchedulePatch, type ScheduleService } from '@tetraloop/core/schedules';
import { ScheduleLimitError } from '@tetraloop/core/state';
import type { AcceptBarrier } from '@tetraloop/core/durability';
import type { ScheduleList, ScheduleView } from './answers.js';
import { answerAccepted } from './runs-router.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { IdempotencyKey } from './requests.js';
import type { RouteName } from './route-table.js';

export interface SchedulesRouterDeps {
  readonly schedules: ScheduleService;
  /** What a run started now waits for (replicas, the AOF) before `202`, as for `/v1/runs`. */
  readonly acceptBarrier?: AcceptBarrier;
}

const notFound = (): HttpError => new HttpError(404, 'schedule_not_found', 'no such schedule');

function idOf(req: Request): string {
  const parsed = OriginId.safeParse(req.params.id);
  if (!parsed.success) throw notFound();
  return parsed.data;
}

/** The store's cap on a tenant's schedules answers 409. */
async function capped<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ScheduleLimitError) throw new HttpError(409, err.code, err.message);
    throw err;
  }
}

export function scheduleHandlers(deps: SchedulesRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const { schedules } = deps;

  const create: RequestHandler = async (req, res) => {
    const body = ScheduleRequest.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const made = await capped(() => schedules.create(callerOf(res).tenant, body.data));
    res
      .status(201)
      .location(`/v1/schedules/${made.id}`)
      .json(made satisfies ScheduleView);
  };

  const list: RequestHandler = async (_req, res) => {
    res.json({ schedules: await schedules.list(callerOf(res).tenant) } satisfies ScheduleList);
  };

  const get: RequestHandler = async (req, res) => {
    const found = await schedules.get(callerOf(res).tenant, idOf(req));
    if (!found) throw notFound();
    res.json(found satisfies ScheduleView);
  };

  const patch: RequestHandler = async (req, res) => {
    const id = idOf(req);
    const body = SchedulePatch.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const changed = await schedules.update(callerOf(res).tenant, id, body.data);
    if (!changed) throw notFound();
    res.json(changed satisfies ScheduleView);
  };

  const remove: RequestHandler = async (req, res) => {
    if (!(await schedules.delete(callerOf(res).tenant, idOf(req)))) throw notFound();
    res.status(204).end();
  };

  const trigger: RequestHandler = async (req, res) => {
    const id = idOf(req);
    const key = IdempotencyKey.safeParse(req.get('idempotency-key'));
    if (!key.success) throw zodToHttp(key.error, ['headers', 'idempotency-key']);
    const result = await schedules.trigger(callerOf(res).tenant, id, key.data);
    if (!result) throw notFound();
    // Answered as any accepted run: once the accept barrier confirmed it.
    await answerAccepted(res, deps.acceptBarrier, {
      runId: result.runId,
      status: result.status,
      acceptedAt: result.acceptedAt,
    });
  };

  return {
    'schedules.create': create,
    'schedules.list': list,
    'schedules.get': get,
    'schedules.patch': patch,
    'schedules.delete': remove,
    'schedules.trigger': trigger,
  };
}
