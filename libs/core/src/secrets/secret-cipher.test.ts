import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decryptSecret, deriveKey, encryptSecret, parseSecretKey } from './secret-cipher.js';

describe('secret cipher', () => {
  const key = randomBytes(32);

  it('takes a key as 64 hex digits or as base64 of 32 bytes, and nothing else', () => {
    expect(parseSecretKey(key.toString('hex'))?.equals(key)).toBe(true);
    expect(parseSecretKey(key.toString('base64'))?.equals(key)).toBe(true);
    expect(parseSecretKey(key.toString('base64url'))?.equals(key)).toBe(true);
    expect(parseSecretKey(randomBytes(16).toString('base64'))).toBeUndefined();
    expect(parseSecretKey('correct horse battery staple')).toBeUndefined();
    expect(parseSecretKey('')).toBeUndefined();
  });

  it('round-trips a value; the stored text is not the value and differs each time', () => {
    const a = encryptSecret(key, 'default', 'TOKEN', 'Bearer xyz');
    const b = encryptSecret(key, 'default', 'TOKEN', 'Bearer xyz');
    expect(a).not.toContain('xyz');
    expect(a).not.toBe(b);
    expect(decryptSecret(key, 'default', 'TOKEN', a)).toBe('Bearer xyz');
  });

  it('refuses another key, another name or another tenant, and a tampered value', () => {
    const stored = encryptSecret(key, 'default', 'TOKEN', 'v');
    expect(() => decryptSecret(randomBytes(32), 'default', 'TOKEN', stored)).toThrow();
    expect(() => decryptSecret(key, 'default', 'OTHER', stored)).toThrow();
    expect(() => decryptSecret(key, 'acme', 'TOKEN', stored)).toThrow();
    const raw = Buffer.from(stored.slice(3), 'base64');
    raw[raw.length - 1]! ^= 1;
    expect(() => decryptSecret(key, 'default', 'TOKEN', `v1.${raw.toString('base64')}`)).toThrow();
  });

  it('derives distinct keys per purpose', () => {
    expect(deriveKey(key, 'a').equals(deriveKey(key, 'a'))).toBe(true);
    expect(deriveKey(key, 'a').equals(deriveKey(key, 'b'))).toBe(false);
    expect(deriveKey(key, 'a').equals(key)).toBe(false);
  });
});
