/**
 * `/v1/triggers`: which events start which runs (docs/triggers.md). A trigger's run request is
 * checked whole when it is made, as `POST /v1/runs` checks a run (`400` naming the field under
 * `request.`); another tenant's trigger is not found.
 */
import type { Request, RequestHandler } from 'express';
import type { TriggerBook } from '@tetraloop/core/triggers';
import type { TriggerList, TriggerView } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { TriggerBody, TriggerIdParam } from './requests.js';
import type { RouteName } from './route-table.js';

export interface TriggersRouterDeps {
  readonly triggers: TriggerBook;
}

const notFound = (): HttpError => new HttpError(404, 'trigger_not_found', 'no such trigger');

function idOf(req: Request): string {
  const parsed = TriggerIdParam.safeParse(req.params.id);
  // A malformed id names no trigger of anyone's.
  if (!parsed.success) throw notFound();
  return parsed.data;
}

export function triggerHandlers(deps: TriggersRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const book = deps.triggers;

  const create: RequestHandler = async (req, res) => {
    if (!req.is('application/json')) {
      throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
    }
    const body = TriggerBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const trigger = await book.create(callerOf(res).tenant, body.data);
    res
      .status(201)
      .location(`/v1/triggers/${trigger.id}`)
      .json(trigger satisfies TriggerView);
  };

  const list: RequestHandler = async (_req, res) => {
    res.json({ triggers: await book.list(callerOf(res).tenant) } satisfies TriggerList);
  };

  const get: RequestHandler = async (req, res) => {
    const trigger = await book.get(callerOf(res).tenant, idOf(req));
    if (!trigger) throw notFound();
    res.json(trigger satisfies TriggerView);
  };

  const remove: RequestHandler = async (req, res) => {
    if (!(await book.delete(callerOf(res).tenant, idOf(req)))) throw notFound();
    res.status(204).end();
  };

  return {
    'triggers.create': create,
    'triggers.list': list,
    'triggers.get': get,
    'triggers.delete': remove,
  };
}
