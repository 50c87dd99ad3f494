/**
 * Who is calling: every `/v1` request is authenticated once (a bearer API key, or the operator's
 * root token) and carries its `Caller` in `res.locals.caller`; each route then checks its access
 * from the route table. With `TETRALOOP_AUTH=off` every caller is root in the default tenant.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { DEFAULT_TENANT, OPEN_CALLER, TenantId, hasScope, type Caller, SCOPES } from '@tetraloop/core/domain';
import type { ApiKeyStore } from '@tetraloop/core/state';
import { HttpError } from './http-errors.js';
import type { RouteAccess } from './route-table.js';

export interface AuthSettings {
  readonly mode: 'required' | 'off';
  /** The operator's root token (`TETRALOOP_ADMIN_TOKEN`), when one is set. */
  readonly rootToken?: string;
  readonly keys: ApiKeyStore;
}

/** Header with which the root token acts for a tenant other than the default one. */
export const TENANT_HEADER = 'x-tetraloop-tenant';

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Compares in constant time (both sides hashed to the same length first). */
export const sameSecret = (given: string, expected: string): boolean =>
  timingSafeEqual(digest(given), digest(expected));

export const bearerOf = (req: Request): string | undefined => {
  const [scheme = '', value] = (req.get('authorization') ?? '').split(' ');
  return scheme.toLowerCase() === 'bearer' && value ? value : undefined;
};

const unauthorized = (message: string): HttpError => new HttpError(401, 'unauthorized', message);

/** The header LangGraph's SDK sends its API key in (`new Client({ apiKey })`). */
export const API_KEY_HEADER = 'x-api-key';

/**
 * Sets `res.locals.caller`, or answers 401. With `apiKeyHeader` (LangGraph's routes), a key may
 * also come as `X-Api-Key`, as LangGraph's SDK sends it; a bearer token is taken first.
 */
export function authenticate(
  settings: AuthSettings,
  options: { apiKeyHeader?: boolean } = {},
): RequestHandler {
  return async (req, res, next) => {
    if (settings.mode === 'off') {
      res.locals.caller = OPEN_CALLER;
      return next();
    }
    const token = bearerOf(req) ?? (options.apiKeyHeader ? req.get(API_KEY_HEADER) || undefined : undefined);
    if (!token) {
      res.set('www-authenticate', 'Bearer realm="tetraloop"');
      throw unauthorized('send an API key: Authorization: Bearer <key>');
    }
    if (settings.rootToken && sameSecret(token, settings.rootToken)) {
      const tenant = TenantId.safeParse(req.get(TENANT_HEADER) ?? DEFAULT_TENANT);
      if (!tenant.success) {
        throw new HttpError(400, 'invalid_request', 'the request is invalid', [
          { path: `headers.${TENANT_HEADER}`, message: tenant.error.issues[0]?.message ?? 'invalid' },
        ]);
      }
      res.locals.caller = { ...OPEN_CALLER, tenant: tenant.data } satisfies Caller;
      return next();
    }
    const record = await settings.keys.verify(token);
    if (!record) throw unauthorized('the API key is unknown, revoked or expired');
    res.locals.caller = {
      keyId: record.keyId,
      tenant: record.tenant,
      scopes: new Set(record.scopes),
      root: false,
    } satisfies Caller;
    next();
  };
}

/** The caller of a request that went through `authenticate`. */
export const callerOf = (res: Response): Caller => (res.locals.caller as Caller | undefined) ?? OPEN_CALLER;

/** Answers 403 naming what is missing when the caller may not use a route. */
export function authorize(access: RouteAccess): RequestHandler {
  return (_req, res, next) => {
    if (access === 'signature') return next();
    const caller = callerOf(res);
    if (access === 'root') {
      if (caller.root) return next();
      throw new HttpError(403, 'forbidden', 'only the root token (TETRALOOP_ADMIN_TOKEN) may do this');
    }
    if (hasScope(caller, access)) return next();
    throw new HttpError(403, 'forbidden', `the API key lacks the scope ${access}`);
  };
}

export { SCOPES };
