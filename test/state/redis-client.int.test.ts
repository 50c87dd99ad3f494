/** A duplicate of a connection, made through the client type the stores see (one server here). */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { connectRedis, duplicateClient, whenReady } from '@tetraloop/core/runtime';

const name = `dup-${randomUUID()}`;
const own = connectRedis(inject('redisUrl'), 'worker', name);
const copy = duplicateClient(own);
afterAll(() => {
  own.disconnect();
  copy.disconnect();
});

describe('duplicateClient', () => {
  it('opens a connection of its own to the same Redis, with the same options', async () => {
    await Promise.all([whenReady(own), whenReady(copy)]);
    expect(copy).not.toBe(own);
    expect(copy.isCluster).toBe(false);
    // Both connections carry the name given to the first (`CLIENT LIST` shows each connection).
    const list = (await own.client('LIST')) as string;
    expect(list.split('\n').filter((line) => line.includes(` name=${name} `))).toHaveLength(2);
  });
});
