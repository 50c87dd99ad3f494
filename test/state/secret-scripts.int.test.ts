/**
 * The secret scripts (`lua-secret/`), called through SecretStore against a real Redis: a value,
 * its update time and its scope are written and deleted together, within the tenant's cap.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { SecretStore, secretKeys } from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const secrets = new SecretStore(redis, { prefix, key: randomBytes(32), maxValueBytes: 8192, maxCount: 2 });

afterAll(async () => {
  await redis.quit();
});

const newTenant = (): string => `t-${randomUUID().slice(0, 8)}`;
const scope = (host: string) => ({ hosts: [host], tools: [] });
const T1 = new Date('2026-01-01T00:00:00.000Z');
const T2 = new Date('2026-01-02T00:00:00.000Z');
/** What each of the tenant's three hashes holds for `name` (the value encrypted). */
async function stored(tenant: string, name: string): Promise<(string | null)[]> {
  const k = secretKeys(prefix, tenant);
  return Promise.all([redis.hget(k.values, name), redis.hget(k.updated, name), redis.hget(k.scopes, name)]);
}
const codeOf = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => 'stored',
    (err: { code?: string }) => err.code,
  );

describe('put-secret', () => {
  it('stores a value with its time and scope, and refuses a new name past the cap but replaces a held one', async () => {
    const tenant = newTenant();
    await secrets.put(tenant, 'A', 'plain value one', scope('a.test'), T1);
    await secrets.put(tenant, 'B', 'two', scope('b.test'), T1);
    const [value, updated, scopeJson] = await stored(tenant, 'A');
    expect(value).not.toContain('plain value');
    expect(updated).toBe(T1.toISOString());
    expect(JSON.parse(scopeJson!)).toEqual(scope('a.test'));
    // At the cap (2): a new name is refused and writes nothing; an existing one is replaced.
    expect(await codeOf(secrets.put(tenant, 'C', 'three', scope('c.test'), T2))).toBe('too_many_secrets');
    expect(await stored(tenant, 'C')).toEqual([null, null, null]);
    await secrets.put(tenant, 'A', 'uno', scope('a2.test'), T2);
    expect((await secrets.resolve(tenant, ['A'])).values.get('A')).toBe('uno');
    expect(await secrets.list(tenant)).toEqual([
      { name: 'A', updatedAt: T2.toISOString(), hosts: ['a2.test'], tools: [] },
      { name: 'B', updatedAt: T1.toISOString(), hosts: ['b.test'], tools: [] },
    ]);
  });

  it('changes only the scope (and time) of a secret when no value is given, and refuses it for a missing one', async () => {
    const tenant = newTenant();
    await secrets.put(tenant, 'A', 'one', scope('a.test'), T1);
    const [value] = await stored(tenant, 'A');
    await secrets.put(tenant, 'A', undefined, { hosts: [], tools: ['mcp.crm.*'] }, T2);
    expect(await stored(tenant, 'A')).toEqual([
      value,
      T2.toISOString(),
      JSON.stringify({ hosts: [], tools: ['mcp.crm.*'] }),
    ]);
    expect((await secrets.resolve(tenant, ['A'])).values.get('A')).toBe('one');
    expect(await codeOf(secrets.put(tenant, 'MISSING', undefined, scope('m.test'), T2))).toBe(
      'secret_not_found',
    );
    expect(await stored(tenant, 'MISSING')).toEqual([null, null, null]);
  });
});

describe('delete-secret', () => {
  it('deletes the value, its time and its scope together, and answers whether it existed', async () => {
    const tenant = newTenant();
    await secrets.put(tenant, 'A', 'one', scope('a.test'), T1);
    await secrets.put(tenant, 'B', 'two', scope('b.test'), T1);
    expect(await secrets.delete(tenant, 'A')).toBe(true);
    expect(await stored(tenant, 'A')).toEqual([null, null, null]);
    expect((await secrets.list(tenant)).map((s) => s.name)).toEqual(['B']);
    expect(await secrets.delete(tenant, 'A')).toBe(false);
    // The freed place under the cap can be taken again.
    await secrets.put(tenant, 'C', 'three', scope('c.test'), T2);
    expect((await secrets.list(tenant)).map((s) => s.name)).toEqual(['B', 'C']);
  });

  it('clears a scope or time left without a value (a secret written before scopes, half gone)', async () => {
    const tenant = newTenant();
    const k = secretKeys(prefix, tenant);
    await redis.hset(k.updated, 'OLD', T1.toISOString());
    await redis.hset(k.scopes, 'OLD', JSON.stringify(scope('o.test')));
    // No value: it did not exist as a secret, but nothing of it is left behind.
    expect(await secrets.delete(tenant, 'OLD')).toBe(false);
    expect(await stored(tenant, 'OLD')).toEqual([null, null, null]);
  });
});
