/**
 * Signed webhooks: each webhook source is configured with a secret, a tenant and optionally the
 * sessions it may reach. A request carries `X-Tetraloop-Signature: t=<unix seconds>,v1=<hex>`,
 * where v1 is HMAC-SHA256(secret, "<t>.<raw body>"). Signing and checking are pure.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { DEFAULT_TENANT, TenantId } from '../domain/tenant.js';
import { SessionKey } from './sense-jobs.js';

/** The header that carries a webhook's signature. */
export const WEBHOOK_SIGNATURE_HEADER = 'x-tetraloop-signature';

/** One webhook source as configured (`TETRALOOP_WEBHOOKS`). */
export const WebhookSource = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}'),
  /** The shared secret requests are signed with; at least 16 characters. */
  secret: z.string().min(16, 'use at least 16 characters'),
  /** The tenant the source's events belong to. @defaultValue "default" */
  tenant: TenantId.default(DEFAULT_TENANT),
  /** The only session keys its events may name; any when absent. */
  sessions: z.array(SessionKey).min(1).optional(),
});
export type WebhookSource = z.infer<typeof WebhookSource>;

/** The configured webhook sources: names must be unique. */
export const WebhookSources = z
  .array(WebhookSource)
  .refine(
    (list) => new Set(list.map((s) => s.name)).size === list.length,
    'webhook source names must be unique',
  );

const hmac = (secret: string, t: string, body: Buffer | string): string =>
  createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');

/**
 * The `X-Tetraloop-Signature` value for `body` (the exact bytes sent) signed with `secret` at
 * `t` (unix seconds). @defaultValue t: now
 */
export function signWebhook(
  secret: string,
  body: Buffer | string,
  t: number = Math.floor(Date.now() / 1000),
): string {
  return `t=${t},v1=${hmac(secret, String(t), body)}`;
}

/** Why a signature was not accepted. */
export type WebhookSignatureFailure =
  'signature_missing' | 'signature_malformed' | 'signature_expired' | 'signature_mismatch';

export type WebhookSignatureCheck =
  | { readonly ok: true; readonly t: number; readonly v1: string }
  | { readonly ok: false; readonly code: WebhookSignatureFailure; readonly message: string };

/**
 * Checks a signature header against the raw body: well formed, `t` within `toleranceSeconds` of
 * `nowSeconds` (either way), and one of its `v1` values equal, in constant time, to the expected
 * HMAC. Answers the `t` and `v1` that matched (what a replay would repeat).
 */
export function verifyWebhookSignature(
  header: string | undefined,
  secret: string,
  body: Buffer | string,
  options: { readonly nowSeconds: number; readonly toleranceSeconds: number },
): WebhookSignatureCheck {
  if (header === undefined || header.trim() === '')
    return { ok: false, code: 'signature_missing', message: 'the X-Tetraloop-Signature header is missing' };
  let t: string | undefined;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const [key, value] = part.trim().split('=', 2) as [string, string | undefined];
    if (key === 't' && value !== undefined) t = value;
    else if (key === 'v1' && value !== undefined) candidates.push(value);
  }
  if (t === undefined || !/^\d{1,12}$/.test(t) || candidates.length === 0) {
    return {
      ok: false,
      code: 'signature_malformed',
      message: 'the X-Tetraloop-Signature header must be t=<unix seconds>,v1=<hex HMAC-SHA256>',
    };
  }
  if (Math.abs(options.nowSeconds - Number(t)) > options.toleranceSeconds) {
    return {
      ok: false,
      code: 'signature_expired',
      message: `the signature's timestamp is more than ${options.toleranceSeconds} s from now`,
    };
  }
  const expected = Buffer.from(hmac(secret, t, body), 'hex');
  for (const v1 of candidates) {
    if (!/^[0-9a-f]{64}$/i.test(v1)) continue;
    const given = Buffer.from(v1, 'hex');
    if (given.length === expected.length && timingSafeEqual(given, expected))
      return { ok: true, t: Number(t), v1: v1.toLowerCase() };
  }
  return { ok: false, code: 'signature_mismatch', message: 'the signature does not match the body' };
}

/** The API's webhook settings: the configured sources and the signature tolerance. */
export interface WebhookSettings {
  readonly sources: readonly WebhookSource[];
  /** @defaultValue 300 */
  readonly toleranceSeconds: number;
}
