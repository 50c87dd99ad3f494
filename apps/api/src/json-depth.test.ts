import { describe, expect, it } from 'vitest';
import { JsonCharsetError, JsonTooDeepError, checkJsonBody, nestsDeeperThan } from './json-depth.js';

const bytes = (text: string): Uint8Array => Buffer.from(text, 'utf8');

describe('JSON nesting depth', () => {
  it('counts arrays and objects inside each other', () => {
    expect(nestsDeeperThan(bytes('{"a":[1,{"b":[]}]}'), 4)).toBe(false);
    expect(nestsDeeperThan(bytes('{"a":[1,{"b":[]}]}'), 3)).toBe(true);
    expect(nestsDeeperThan(bytes('[[],[],[],[]]'), 2)).toBe(false);
    expect(nestsDeeperThan(bytes(`${'['.repeat(65)}${']'.repeat(65)}`), 64)).toBe(true);
    expect(nestsDeeperThan(bytes(`${'['.repeat(64)}${']'.repeat(64)}`), 64)).toBe(false);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(nestsDeeperThan(bytes(JSON.stringify({ text: '[[[[{{{{' })), 1)).toBe(false);
    expect(nestsDeeperThan(bytes(JSON.stringify({ text: 'say \\"[[[[\\" and "{{{{' })), 1)).toBe(false);
    expect(nestsDeeperThan(bytes(JSON.stringify(['ü[', { a: 'ß{' }])), 2)).toBe(false);
  });
});

describe('JSON body check', () => {
  // U+2200 is `00 22` in UTF-16LE: a byte scan would see a quote and read the rest as a string.
  const hidden = (depth: number): string => `{"input":["\u2200",${'['.repeat(depth)}${']'.repeat(depth)}]}`;

  it('refuses a body in a charset other than UTF-8 before counting its depth', () => {
    const utf16 = Buffer.from(hidden(3000), 'utf16le');
    expect(nestsDeeperThan(utf16, 64)).toBe(false);
    for (const charset of ['utf-16le', 'utf-16be', 'utf-16', 'utf-32', 'utf-7']) {
      expect(() => checkJsonBody(utf16, charset, 64), charset).toThrow(JsonCharsetError);
    }
  });

  it('counts the depth of a UTF-8 body', () => {
    expect(() => checkJsonBody(bytes(hidden(3000)), 'utf-8', 64)).toThrow(JsonTooDeepError);
    expect(() => checkJsonBody(bytes(hidden(10)), 'utf-8', 64)).not.toThrow();
  });
});
