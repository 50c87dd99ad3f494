import { describe, expect, it } from 'vitest';
import { signWebhook, verifyWebhookSignature } from './signature.js';

const secret = 'a-secret-of-16-chars';
const body = '{"type":"push"}';
const now = 1_800_000_000;
const check = (header: string | undefined, raw: string = body, at = now) =>
  verifyWebhookSignature(header, secret, raw, { nowSeconds: at, toleranceSeconds: 300 });

describe('webhook signatures', () => {
  it('accept a signature of the exact body within the tolerance', () => {
    const header = signWebhook(secret, body, now - 299);
    expect(header).toMatch(/^t=1799999701,v1=[0-9a-f]{64}$/);
    expect(check(header)).toMatchObject({ ok: true, t: now - 299 });
    // Another v1 beside it (a rotated secret) does not get in the way.
    expect(check(`v1=${'0'.repeat(64)},${header}`)).toMatchObject({ ok: true });
  });

  it('refuse a missing, malformed, stale, future or wrong signature', () => {
    expect(check(undefined)).toMatchObject({ ok: false, code: 'signature_missing' });
    expect(check('v1=abc')).toMatchObject({ ok: false, code: 'signature_malformed' });
    expect(check(`t=${now}`)).toMatchObject({ ok: false, code: 'signature_malformed' });
    expect(check(signWebhook(secret, body, now - 301))).toMatchObject({
      ok: false,
      code: 'signature_expired',
    });
    expect(check(signWebhook(secret, body, now + 301))).toMatchObject({
      ok: false,
      code: 'signature_expired',
    });
    expect(check(signWebhook(secret, body, now), '{"type":"pull"}')).toMatchObject({
      ok: false,
      code: 'signature_mismatch',
    });
    expect(check(signWebhook('another-secret-16ch', body, now))).toMatchObject({
      ok: false,
      code: 'signature_mismatch',
    });
    expect(check(`t=${now},v1=zz`)).toMatchObject({ ok: false, code: 'signature_mismatch' });
  });
});
