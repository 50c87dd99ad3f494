/**
 * Each tenant's secrets over HTTP, write-only: a value goes in with PUT, with the hosts and tools
 * it may go to, and never comes out; the list holds names, update times and scopes. Runs use a
 * secret as `{"$secret": "NAME"}` in a tool call's args, filled in by the worker at call time where
 * its scope allows.
 */
import type { Request, RequestHandler } from 'express';
import { SecretName } from '@tetraloop/core/secrets';
import { SecretStoreError, type SecretErrorCode, type SecretStore } from '@tetraloop/core/state';
import type { SecretList } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { SecretBody } from './requests.js';
import type { RouteName } from './route-table.js';

export interface SecretsRouterDeps {
  readonly secrets: SecretStore;
}

const STATUS: Record<SecretErrorCode, number> = {
  secrets_off: 409,
  secret_too_large: 413,
  too_many_secrets: 409,
  secret_unreadable: 500,
  secret_not_found: 404,
};

function nameOf(req: Request): string {
  const parsed = SecretName.safeParse(req.params.name);
  if (!parsed.success) throw zodToHttp(parsed.error, ['params', 'name']);
  return parsed.data;
}

/** The store's refusals as HTTP errors; anything else goes on to the error handler. */
async function answering<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof SecretStoreError) throw new HttpError(STATUS[err.code], err.code, err.message);
    throw err;
  }
}

export function secretHandlers(deps: SecretsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const put: RequestHandler = async (req, res) => {
    const name = nameOf(req);
    const body = SecretBody.safeParse(req.body);
    // The issues name the field, never the value.
    if (!body.success) throw zodToHttp(body.error);
    const { value, hosts = [], tools = [] } = body.data;
    await answering(() => deps.secrets.put(callerOf(res).tenant, name, value, { hosts, tools }));
    res.status(204).end();
  };

  const list: RequestHandler = async (_req, res) => {
    res.json({
      secrets: await answering(() => deps.secrets.list(callerOf(res).tenant)),
    } satisfies SecretList);
  };

  const remove: RequestHandler = async (req, res) => {
    const name = nameOf(req);
    if (!(await answering(() => deps.secrets.delete(callerOf(res).tenant, name))))
      throw new HttpError(404, 'secret_not_found', `no secret "${name}"`);
    res.status(204).end();
  };

  return { 'secrets.put': put, 'secrets.list': list, 'secrets.delete': remove };
}
