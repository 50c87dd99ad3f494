import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from './json-depth.js';

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
