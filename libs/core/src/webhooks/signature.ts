/**
 * The signature of a webhook, inbound (sources posting events) and outbound (Tetraloop posting its
 * events to subscribers) alike: `X-Tetraloop-Signature: t=<unix seconds>,v1=<hex>`, where v1 is
 * HMAC-SHA256(secret, "<t>.<raw body>"). Several `v1` values may be given (a receiver rotating its
 * secret); one that matches is enough. Signing and checking are pure.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** The header that carries a webhook's signature. */
export const WEBHOOK_SIGNATURE_HEADER = 'x-tetraloop-signature';

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

/**
 * A new signing secret for outbound webhooks: 32 random bytes, base64url, behind `whsec_` so a
 * leaked one is recognisable (and matched by secret scanners that know the prefix).
 */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;
