import { describe, expect, it } from 'vitest';
import { REDACTED, fieldName, redactor } from './redact.js';

describe('log redaction', () => {
  it('redacts credential fields in any case, at any depth, and leaves the rest', () => {
    const redact = redactor();
    const line = {
      request: {
        Headers: { AUTHORIZATION: 'Bearer a', 'X-Api-Key': 'b', Cookie: 'c', accept: 'json' },
        nested: [{ deeper: { Access_Token: 'd', Password: 'e', count: 3 } }],
      },
      sessionKey: 'alice',
      totalTokens: 12,
      env: { TETRALOOP_SECRET_KEY: 'f', OpenAI_Api_Key: 'g' },
    };
    const out = redact(line);
    const text = JSON.stringify(out);
    for (const secret of ['Bearer a', '"b"', '"c"', '"d"', '"e"', '"f"', '"g"'])
      expect(text).not.toContain(secret);
    expect(out.request.Headers.accept).toBe('json');
    expect(out.request.nested[0]!.deeper.count).toBe(3);
    expect(out).toMatchObject({ sessionKey: 'alice', totalTokens: 12 });
    expect(out.request.Headers.AUTHORIZATION).toBe(REDACTED);
  });

  it('never changes what it is given, and returns it as is when there is nothing to redact', () => {
    const redact = redactor();
    const line = { a: { authorization: 'x' }, b: { c: 1 } };
    const out = redact(line);
    expect(line.a.authorization).toBe('x');
    expect(out.b).toBe(line.b);
    const clean = { a: [1, { b: 2 }] };
    expect(redact(clean)).toBe(clean);
  });

  it('adds configured names, pino-style paths counting by their last name', () => {
    expect(fieldName('*.customerCard')).toBe('customercard');
    expect(fieldName('headers["X-Ssn"]')).toBe('x-ssn');
    const redact = redactor(['*.customerCard']);
    expect(redact({ pay: { CustomerCard: '4111' } })).toEqual({ pay: { CustomerCard: REDACTED } });
  });

  it('leaves errors and other class instances to their serializers', () => {
    const err = new Error('boom');
    expect(redactor()({ err }).err).toBe(err);
  });
});
