import { describe, expect, it } from 'vitest';
import {
  SECRET_MASK,
  fillSecrets,
  findSecretRefs,
  malformedSecretRefs,
  replaceSecretRefs,
  scrubSecrets,
} from './secret-ref.js';

const args = {
  url: 'https://api.example.org',
  headers: { Authorization: { $secret: 'API_TOKEN' }, accept: 'json' },
  json: { items: [{ key: { $secret: 'ITEM_KEY' } }] },
};

describe('secret references', () => {
  it('are found with their places, deep in objects and arrays', () => {
    expect(findSecretRefs(args)).toEqual([
      { name: 'API_TOKEN', at: ['headers', 'Authorization'] },
      { name: 'ITEM_KEY', at: ['json', 'items', 0, 'key'] },
    ]);
  });

  it('are whole values with a valid name; anything else with a $secret key is reported', () => {
    expect(malformedSecretRefs(args)).toEqual([]);
    expect(
      malformedSecretRefs({
        a: { $secret: 'X', note: 'y' },
        b: [{ $secret: 'not-a-name' }],
        c: { $secret: 42 },
        d: { $secret: '9LIVES' },
      }).map((i) => i.at),
    ).toEqual([['a'], ['b', 0], ['c'], ['d']]);
    expect(findSecretRefs({ a: { $secret: 'X', note: 'y' } })).toEqual([]);
    // A malformed one is not a reference, but what it holds is looked into.
    expect(findSecretRefs({ a: { $secret: 'X', note: { $secret: 'Y' } } })).toEqual([
      { name: 'Y', at: ['a', 'note'] },
    ]);
    expect(findSecretRefs([{ $secret: 'A' }], ['args'])).toEqual([{ name: 'A', at: ['args', 0] }]);
  });

  it('are filled in only at their declared places, without changing the args', () => {
    const refs = findSecretRefs(args);
    const values = new Map([
      ['API_TOKEN', 'Bearer t0ken'],
      ['ITEM_KEY', 'k3y'],
    ]);
    // A reference brought in from elsewhere (a node's output) sits at no declared place.
    const resolved = { ...args, body: undefined, query: { q: { $secret: 'API_TOKEN' } } };
    const filled = fillSecrets(resolved, refs, values) as typeof resolved;
    expect(filled.headers.Authorization).toBe('Bearer t0ken');
    expect(filled.json.items[0]!.key).toBe('k3y');
    expect(filled.query.q).toEqual({ $secret: 'API_TOKEN' });
    expect(args.headers.Authorization).toEqual({ $secret: 'API_TOKEN' });
  });

  it('leave a place a plugin rewrote as it is', () => {
    const refs = findSecretRefs(args);
    const rewritten = { ...args, headers: { Authorization: 'Basic other' } };
    const filled = fillSecrets(rewritten, refs, new Map([['API_TOKEN', 'v4lue']])) as typeof rewritten;
    expect(filled.headers.Authorization).toBe('Basic other');
  });

  it('can stand in as a placeholder for a schema check', () => {
    expect(replaceSecretRefs(args, () => SECRET_MASK)).toMatchObject({
      headers: { Authorization: SECRET_MASK },
      json: { items: [{ key: SECRET_MASK }] },
    });
  });
});

describe('scrubbing secret values', () => {
  it('masks every occurrence in strings and keys, deep', () => {
    const out = scrubSecrets(
      {
        ok: false,
        error: { message: 'echo: Bearer s3cret-value', data: ['x s3cret-value y'] },
        's3cret-value': 1,
      },
      ['s3cret-value'],
    );
    expect(JSON.stringify(out)).not.toContain('s3cret-value');
    expect(out.error.message).toBe(`echo: Bearer ${SECRET_MASK}`);
  });

  it('ignores values too short to look for', () => {
    const value = { a: 'abc' };
    expect(scrubSecrets(value, ['ab'])).toBe(value);
  });
});

describe('secret masking', () => {
  const value = 'Sup3rS3cretValue/with?chars&=+ x';

  it('masks every form a call makes of a value: URL, form, JSON, base64, inside longer text', () => {
    const forms = [
      value,
      encodeURIComponent(value),
      new URLSearchParams({ token: value }).toString(),
      `http://h/p?token=${encodeURIComponent(value).replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase())}`,
      JSON.stringify({ token: value }),
      JSON.stringify(JSON.stringify({ token: value })),
      Buffer.from(value).toString('base64'),
      Buffer.from(value).toString('base64url'),
      `Basic ${Buffer.from(`user:${value}`).toString('base64')}`,
      Buffer.from(`{"echo": "${value}"}`).toString('base64'),
      Buffer.from(`xx${value}yy`).toString('base64'),
    ];
    for (const form of forms) {
      const scrubbed = scrubSecrets({ seen: form }, [value, `user:${value}`]);
      expect(scrubbed.seen, form).toContain(SECRET_MASK);
      expect(scrubbed.seen, form).not.toContain(value);
      expect(scrubbed.seen, form).not.toContain(encodeURIComponent(value));
      expect(scrubbed.seen, form).not.toContain(Buffer.from(value).toString('base64').slice(4, 20));
    }
  });

  it('leaves text without the value alone', () => {
    expect(scrubSecrets({ a: 'nothing to see', b: 'U3VwM3', c: 42 }, [value])).toEqual({
      a: 'nothing to see',
      b: 'U3VwM3',
      c: 42,
    });
  });
});
