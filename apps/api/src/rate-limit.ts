/**
 * Request rates of `/v1`: every request counts against its API key's bucket and its tenant's
 * (`TETRALOOP_RATE_LIMIT_PER_KEY`, `TETRALOOP_RATE_LIMIT_PER_TENANT`, a tenant's
 * `requestsPerMinute`); one that does not fit gets `429 rate_limited` with `Retry-After`. Runs after
 * the auth middleware, reading the caller it set; with auth off (no key) only the tenant's bucket
 * applies.
 */
import type { RequestHandler } from 'express';
import type { Ceilings } from '@tetraloop/core/ceilings';
import type { RateLimitStore } from '@tetraloop/core/state';
import { callerOf } from './auth.js';
import { HttpError, sendError } from './http-errors.js';

export interface RateLimitDeps {
  readonly ceilings: Ceilings;
  readonly rateLimits: RateLimitStore;
}

export function rateLimit(deps: RateLimitDeps): RequestHandler {
  return async (_req, res, next) => {
    const caller = callerOf(res);
    const rates = deps.ceilings.rates(caller.tenant, caller.keyId);
    const taken = await deps.rateLimits.take(caller.tenant, caller.keyId, rates);
    if (taken.ok) return next();
    const seconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
    const whose = taken.bucket === 'key' ? 'this API key' : `tenant "${caller.tenant}"`;
    res.set('Retry-After', String(seconds));
    sendError(
      res,
      new HttpError(
        429,
        'rate_limited',
        `too many requests for ${whose} (${taken.bucket === 'key' ? rates.perKey : rates.perTenant} a minute); retry in ${seconds} s`,
      ),
    );
  };
}
