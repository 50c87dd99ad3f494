/**
 * How a script call reaches Redis: in full (EVAL) the first time on a socket, by its SHA-1
 * (EVALSHA) after, in full again on a new socket and after Redis forgot it under a live one (a
 * script flush), and in full again after an error answer to a call that carried its text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectRedis,
  startRedisServer,
  whenReady,
  type RedisClient,
  type RedisServer,
} from '@tetraloop/core/runtime';
import { PlanCacheStore } from '@tetraloop/core/state';
import { commandsWhile } from '../support/monitor.js';

describe('a script call', () => {
  // A Redis of its own: its script cache is flushed, and the rest of the suite shares the other.
  let server: RedisServer;
  let redis: RedisClient;
  let cache: PlanCacheStore;
  const entry = { graph: { nodes: [] }, createdAt: '2026-01-01T00:00:00.000Z', runId: 'r1' };
  /** One script call (`forget-cached-plan-1`), through the store that makes it. */
  const forget = () => cache.forget(cache.keyOf('agent', 'task'), 'r1');
  /** The form each script call took, as Redis ran it, while `act` ran. */
  const formsWhile = async (act: () => Promise<unknown>): Promise<string[]> => {
    const { commands, out } = await commandsWhile(server.url, act);
    if (out instanceof Error) throw out;
    return commands
      .filter((c) => c.source !== 'lua' && /^eval(sha)?$/i.test(c.args[0] ?? ''))
      .map((c) => c.args[0]!.toLowerCase());
  };

  beforeAll(async () => {
    server = await startRedisServer();
    redis = connectRedis(server.url, 'worker', 'script-calls');
    await whenReady(redis);
    cache = new PlanCacheStore(redis, { prefix: 'script-calls', enabled: true, ttlSeconds: 60 });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('is sent in full on a new socket, by its hash after, and in full again when Redis forgot it', async () => {
    expect(await formsWhile(async () => [await forget(), await forget()])).toEqual(['eval', 'evalsha']);
    await redis.script('FLUSH');
    await cache.put(cache.keyOf('agent', 'task'), entry);
    // Its EVALSHA answers NOSCRIPT and it is sent again in full, and runs: it forgets the entry.
    let forgot: unknown;
    const forms = await formsWhile(async () => (forgot = await forget()));
    expect(forms.at(-1)).toBe('eval');
    expect(forgot).toBe(true);
    expect(await formsWhile(forget)).toEqual(['evalsha']);
    // A new socket: in full again.
    await redis.call('CLIENT', 'KILL', 'SKIPME', 'no', 'TYPE', 'normal');
    await whenReady(redis);
    expect(await formsWhile(async () => [await forget(), await forget()])).toEqual(['eval', 'evalsha']);
  });
});
