/**
 * `/v1/keys` and `/v1/tenants`: API keys made, listed and revoked by an `admin` key of a tenant
 * (within it) or by the root token (for any tenant), and a tenant deleted with all its data (root).
 */
import type { RequestHandler } from 'express';
import type { ApiKeyStore } from '@tetraloop/core';
import type { KeyCreated, KeyList, TenantDeleted } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { KeyBody, KeyIdParam, TenantId } from './requests.js';
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
    if (!caller.root && tenant !== caller.tenant) {
      throw new HttpError(403, 'forbidden', 'an admin key makes keys of its own tenant only', [
        { path: 'tenant', message: `must be ${caller.tenant}` },
      ]);
    }
    // A key never gets more than the key that makes it.
    const beyond = body.data.scopes.filter((s) => !caller.root && !caller.scopes.has(s));
    if (beyond.length > 0) {
      throw new HttpError(403, 'forbidden', `the API key lacks the scope ${beyond[0]}`);
    }
    const { record, key } = await deps.keys.create({ ...body.data, tenant });
    res.status(201).json({ ...record, key } satisfies KeyCreated);
  };

  const list: RequestHandler = async (_req, res) => {
    const caller = callerOf(res);
    res.json({ keys: await deps.keys.list(caller.root ? undefined : caller.tenant) } satisfies KeyList);
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
