/**
 * Express's `trust proxy` setting from `TETRALOOP_TRUST_PROXY`: whose `X-Forwarded-*` headers the
 * API believes, so that behind a TLS proxy `req.secure` is true and the Bull Board login cookie is
 * `Secure`. Read the way Express reads the setting: `true` (every hop), `false` (none), a hop
 * count, or comma-separated addresses, subnets and the names `loopback`, `linklocal`, `uniquelocal`.
 */
import { createRequire } from 'node:module';
import type Express from 'express';

/** A value for `app.set('trust proxy', …)`. */
export type TrustProxy = boolean | number | string;

/**
 * The setting `text` stands for; throws, saying which entry is wrong, when Express would refuse it
 * (an entry that is neither an address, a subnet nor one of the names).
 */
export function parseTrustProxy(text: string): TrustProxy {
  const value = text.trim();
  if (value === '' || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  // Express compiles the list when it is set (proxy-addr): a bad entry throws here, at boot.
  // Loaded here, not above: the settings are read by processes that never serve HTTP.
  const express = createRequire(import.meta.url)('express') as typeof Express;
  express().set('trust proxy', value);
  return value;
}
