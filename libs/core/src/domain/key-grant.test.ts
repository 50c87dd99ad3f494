import { describe, expect, it } from 'vitest';
import { KEY_MAKER_PATTERN, keyGrantIssues, type KeyGrant } from './key-grant.js';

const at = (minutes: number): string => new Date(Date.UTC(2030, 0, 1, 0, minutes)).toISOString();
const maker: KeyGrant = { tenant: 'acme', scopes: ['admin', 'runs:read'], expiresAt: at(2) };

describe('what a key may give a key it makes', () => {
  it('is its own tenant, at most its scopes, and a life ending no later than its own', () => {
    expect(keyGrantIssues(maker, { tenant: 'acme', scopes: ['runs:read'], expiresAt: at(2) })).toEqual([]);
    expect(keyGrantIssues(maker, { tenant: 'acme', scopes: ['admin'], expiresAt: at(1) })).toEqual([]);
  });

  it('names each field beyond it', () => {
    const paths = (wanted: KeyGrant): string[] => keyGrantIssues(maker, wanted).map((i) => i.path);
    expect(paths({ tenant: 'acme', scopes: ['runs:read'] })).toEqual(['expiresAt']);
    expect(paths({ tenant: 'acme', scopes: ['runs:read'], expiresAt: at(3) })).toEqual(['expiresAt']);
    expect(paths({ tenant: 'acme', scopes: ['runs:write'], expiresAt: at(1) })).toEqual(['scopes']);
    expect(paths({ tenant: 'beta', scopes: ['runs:write'] })).toEqual(['tenant', 'scopes', 'expiresAt']);
  });

  it('lets a key without expiry make keys with or without one', () => {
    const lasting: KeyGrant = { tenant: 'acme', scopes: ['admin'] };
    expect(keyGrantIssues(lasting, { tenant: 'acme', scopes: ['admin'] })).toEqual([]);
    expect(keyGrantIssues(lasting, { tenant: 'acme', scopes: ['admin'], expiresAt: at(9) })).toEqual([]);
  });

  it('names a maker by key id or root', () => {
    expect(KEY_MAKER_PATTERN.test('root')).toBe(true);
    expect(KEY_MAKER_PATTERN.test('0123456789abcdef')).toBe(true);
    for (const bad of ['Root', '0123456789ABCDEF', '0123456789abcde', 'root0123456789ab']) {
      expect(KEY_MAKER_PATTERN.test(bad), bad).toBe(false);
    }
  });
});
