/**
 * Request rates in Redis: a token bucket per API key and one per tenant, taken from in one script
 * (`lua-limits/take-tokens-2.lua`) so a refused request takes nothing from either. The rates
 * themselves are the ceilings' (`ceilings/ceilings.ts`).
 */
import type { RedisClient } from './redis-client.js';
import type { RequestRates } from '../ceilings/ceilings.js';
import { rateBucketKey } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

export type RateDecision =
  | { readonly ok: true }
  | {
      readonly ok: false;
      /** How long until one request fits again. */
      readonly retryAfterMs: number;
      /** Which bucket is empty. */
      readonly bucket: 'key' | 'tenant';
    };

export class RateLimitStore {
  private readonly script: ScriptRunner;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.script = loadScripts(redis);
  }

  /** Takes one request of `tenant` (and of its API key `keyId`, when not null) at `rates`. */
  async take(tenant: string, keyId: string | null, rates: RequestRates): Promise<RateDecision> {
    const perKey = keyId === null ? 0 : rates.perKey;
    if (perKey === 0 && rates.perTenant === 0) return { ok: true };
    const [taken, retryAfterMs, empty] = (await this.script(
      'take-tokens-2',
      [rateBucketKey(this.prefix, tenant, keyId ?? ''), rateBucketKey(this.prefix, tenant, null)],
      [perKey, rates.perTenant],
    )) as [number, number, number];
    if (taken === 1) return { ok: true };
    return { ok: false, retryAfterMs, bucket: empty === 1 ? 'key' : 'tenant' };
  }
}
