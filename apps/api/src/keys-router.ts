/**
 * `/v1/keys` and `/v1/tenants`: API keys made, listed and revoked by an `admin` key of a tenant
 * (within it, no more than it holds, revoked with it) or by the root token (for any tenant), and a
 * tenant deleted with all its data (root).
 */
import type { RequestHandler } from 'express';
import { ROOT_MAKER } from '@tetraloop/core/domain';
import { KeyGrantError, KeyMakerGoneError, type ApiKeyStore } from '@tetraloop/core/state';
import type { KeyCreated, KeyList, TenantDeleted } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { KeyBody, KeyIdParam, KeyListQuery, TenantId } from './requests.js';
import type { RouteName } from './route-table.js';

export interface KeysRouterDeps {
  readonly keys: ApiKeyStore;
  /** Deletes every key, run, session, lesson, memory, blob and secret of a tenant. */
  readonly purgeTenant: (tenant: string) => Promise<{ keys: number; runs: number; deleted: number }>;
}

export function keyHandlers(deps: KeysRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const create: RequestHandler = async (req, res) => {
    const body = KeyBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const caller = callerOf(res);
    const tenant = body.data.tenant ?? caller.tenant;
    try {
      // A key never gets more than the key that makes it: the store checks the maker's record.
      const createdBy = caller.root || caller.keyId === null ? ROOT_MAKER : caller.keyId;
      const { record, key } = await deps.keys.create({ ...body.data, tenant, createdBy });
      res.status(201).json({ ...record, key } satisfies KeyCreated);
    } catch (err) {
      if (err instanceof KeyGrantError) {
        throw new HttpError(403, 'forbidden', err.message, err.issues);
      }
      if (err instanceof KeyMakerGoneError) {
        throw new HttpError(401, 'unauthorized', 'the API key is unknown, revoked or expired');
      }
      throw err;
    }
  };

  const list: RequestHandler = async (req, res) => {
    const query = KeyListQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const caller = callerOf(res);
    const keys = await deps.keys.list(caller.root ? undefined : caller.tenant, query.data.createdBy);
    res.json({ keys } satisfies KeyList);
  };

  const revoke: RequestHandler = async (req, res) => {
    const keyId = KeyIdParam.safeParse(req.params.keyId);
    const caller = callerOf(res);
    if (!keyId.success || !(await deps.keys.revoke(keyId.data, caller.root ? undefined : caller.tenant))) {
      throw new HttpError(404, 'key_not_found', 'no such key');
    }
    res.status(204).end();
  };

  const deleteTenant: RequestHandler = async (req, res) => {
    const tenant = TenantId.safeParse(req.params.tenant);
    if (!tenant.success) throw zodToHttp(tenant.error, ['params', 'tenant']);
    const purged = await deps.purgeTenant(tenant.data);
    res.json({
      tenant: tenant.data,
      deleted: true,
      keys: purged.keys,
      runs: purged.runs,
      redisKeys: purged.deleted,
    } satisfies TenantDeleted);
  };

  return { 'keys.create': create, 'keys.list': list, 'keys.revoke': revoke, 'tenants.delete': deleteTenant };
}
