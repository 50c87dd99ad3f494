import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { canonicalJson, fingerprint, withFingerprints } from './fingerprint.js';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

describe('fingerprints', () => {
  it('hash the canonical JSON: keys sorted at every depth, so key order does not change them', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: 0 }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[2,{"e":0,"f":1}]},"b":1}',
    );
    expect(fingerprint({ b: 1, a: 2 })).toBe(fingerprint({ a: 2, b: 1 }));
    expect(fingerprint({ a: 2, b: 1 })).toBe(sha256('{"a":2,"b":1}'));
  });

  it('write numbers as RFC 8785 does, and what JSON drops as it drops it (the value as stored)', () => {
    expect(canonicalJson({ n: 1e21, m: 0.1, z: -0, u: undefined })).toBe('{"m":0.1,"n":1e+21,"z":0}');
    expect(canonicalJson([Number.NaN, undefined])).toBe('[null,null]');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('leave out a value canonical JSON cannot write rather than hash something else', () => {
    expect(fingerprint({ text: 'cut \ud800 here' })).toBeUndefined();
    expect(fingerprint(['\udc00'])).toBeUndefined();
    expect(fingerprint({ b: Object(1n) })).toBeUndefined();
    // Written out as text, a backslash before "ud800" is no surrogate; a pair is one character.
    expect(canonicalJson({ text: '\\ud800', pair: '\ud83d\ude00' })).toBe(
      '{"pair":"\ud83d\ude00","text":"\\\\ud800"}',
    );
  });

  it('are the text canonicalize writes for the value as JSON stores it, in every case', () => {
    const values: unknown[] = [
      { b: 1, a: { d: [2, { f: 1, e: 0 }], c: 'x' } },
      { '10': 'ten', '2': 'two', b: 'bee', '01': 'not an index' },
      { z: { '1': [{ y: 1, x: 2 }] }, a: 0 },
      { é: 1, z: 2, Z: 3, '\ud83d\ude00': 4, '\uffff': 5, '': 6 },
      JSON.parse('{"__proto__": {"b": 1, "a": 2}, "k": "v"}'),
      { date: new Date(0), nested: { toJSON: () => ({ y: 1, x: [undefined, () => 1] }) } },
      { big: 1e21, small: 1e-7, neg: -0, frac: 0.1 + 0.2, n: Number.NaN, inf: Infinity },
      [null, true, 'text with "quotes" and \n', [[]], {}],
      'plain',
      42,
      // Boxed primitives and class instances: written as JSON.stringify unwraps or reads them.
      { n: new Number(1), b: [new Boolean(false)], s: new String(''), t: new String('ab') },
      new Number(3),
      {
        m: new Map([['k', 1]]),
        u: new URL('https://example.org/a?b=1'),
        c: new (class {
          y = 1;
          x = 2;
        })(),
      },
    ];
    for (const value of values) {
      expect(canonicalJson(value)).toBe(canonicalize(JSON.parse(JSON.stringify(value)) as unknown));
    }
  });

  it('tell the JSON size of each value they hash, as JSON.stringify writes it', () => {
    const done = { status: 'succeeded' as const, attempts: [], finishedAt: 'now', durationMs: 1 };
    const values = [
      { b: 'é €😀', a: [1, { d: null, c: 'x' }] },
      { '10': 1, '2': [new Number(3)] },
      'a "quoted" \\ text\n',
    ];
    for (const value of values) {
      const sizes: { input?: number; output?: number } = {};
      withFingerprints({ ...done, input: value, output: [value] }, sizes);
      expect(sizes).toEqual({
        input: Buffer.byteLength(JSON.stringify(value)),
        output: Buffer.byteLength(JSON.stringify([value])),
      });
    }
    const none: { input?: number } = {};
    withFingerprints({ ...done, input: 'cut \ud800 here' }, none);
    expect(none).toEqual({});
  });

  it('are added to a snapshot for the input and output it has, and only those', () => {
    const base = { status: 'succeeded' as const, attempts: [], finishedAt: 'now', durationMs: 1 };
    const both = withFingerprints({ ...base, input: { args: 1 }, output: 'ok' });
    expect(both.inputSha256).toBe(sha256('{"args":1}'));
    expect(both.outputSha256).toBe(sha256('"ok"'));
    const none = withFingerprints(base);
    expect('inputSha256' in none || 'outputSha256' in none).toBe(false);
  });
});
