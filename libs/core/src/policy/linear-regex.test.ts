import { describe, expect, it } from 'vitest';
import { linearRegex } from './linear-regex.js';

describe('linear-time regular expressions', () => {
  it('match like RegExp.test for ordinary patterns', () => {
    expect(linearRegex('^[a-z]+@example\\.org$').test('ada@example.org')).toBe(true);
    expect(linearRegex('evil\\.com').test('https://evil.com/x')).toBe(true);
    expect(linearRegex('evil\\.com').test('https://EVIL.COM/x')).toBe(false);
    expect(linearRegex('evil\\.com', { ignoreCase: true }).test('https://EVIL.COM/x')).toBe(true);
  });

  it('answer a catastrophic pattern at once', () => {
    // With RegExp this backtracks 2^40 times; RE2 answers in one pass.
    expect(linearRegex('^(a+)+$').test(`${'a'.repeat(40)}b`)).toBe(false);
    expect(linearRegex('^(a|a)*$').test(`${'a'.repeat(5000)}!`)).toBe(false);
  });

  it('refuse what RE2 cannot run in linear time', () => {
    expect(() => linearRegex('(a)\\1')).toThrow();
    expect(() => linearRegex('a(?=b)')).toThrow();
  });

  it('print as RegExp does, so a validator keeps two patterns apart', () => {
    expect(String(linearRegex('^a$'))).toBe('/^a$/');
    expect(String(linearRegex('^b$', { ignoreCase: true }))).toBe('/^b$/i');
  });
});
