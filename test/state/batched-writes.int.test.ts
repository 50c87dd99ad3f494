/**
 * A connection from `connectRedis` sends the commands one tick issues in one write, and one with
 * `writes: 'iteration'` those of a whole iteration of the event loop: counted as the write system
 * calls of this thread (`syscw` in /proc/thread-self/io, Linux), beside a plain ioredis connection
 * that writes each command on its own.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connectRedis, whenReady, type RedisClient } from '@tetraloop/core/runtime';

const COMMANDS = 100;
const IO = '/proc/thread-self/io';
const writes = (): number => Number(/syscw:\s*(\d+)/.exec(readFileSync(IO, 'utf8'))![1]);

let batched: RedisClient;
let perIteration: RedisClient;
let plain: Redis;
beforeAll(async () => {
  batched = connectRedis(inject('redisUrl'), 'worker', 'batched-writes');
  perIteration = connectRedis(inject('redisUrl'), 'client', 'batched-writes-iteration', {
    writes: 'iteration',
  });
  plain = new Redis(inject('redisUrl'));
  await Promise.all([whenReady(batched), whenReady(perIteration), whenReady(plain)]);
});
afterAll(() => {
  batched?.disconnect();
  perIteration?.disconnect();
  plain?.disconnect();
});

/**
 * The write system calls this process made while `redis` answered COMMANDS commands issued at
 * once, or (`apart`) each from a timer callback of its own: all in one iteration of the event
 * loop, each in a tick of its own, as an HTTP server handles the requests one read brought.
 */
async function writesFor(redis: RedisClient | Redis, apart = false): Promise<number> {
  const before = writes();
  const answers = await Promise.all(
    Array.from(
      { length: COMMANDS },
      (_, i) =>
        new Promise((resolve, reject) => {
          const send = (): void => void redis.echo(`c${i}`).then(resolve, reject);
          if (apart) setTimeout(send, 0);
          else send();
        }),
    ),
  );
  const made = writes() - before;
  expect(answers).toEqual(Array.from({ length: COMMANDS }, (_, i) => `c${i}`));
  return made;
}

describe.skipIf(!existsSync(IO))('a connection from connectRedis', () => {
  it('sends what one tick issues in one write, answered in order', async () => {
    // A few writes of other parts of this process may land in the window; a write per command
    // would be a hundred.
    expect(await writesFor(batched)).toBeLessThan(10);
    expect(await writesFor(plain)).toBeGreaterThanOrEqual(COMMANDS * 0.9);
  });

  it('with `writes: iteration`, sends what the callbacks of one iteration issue in one write', async () => {
    expect(await writesFor(perIteration, true)).toBeLessThan(10);
    // Each timer callback is a tick of its own.
    expect(await writesFor(batched, true)).toBeGreaterThanOrEqual(COMMANDS * 0.9);
  });

  it('still batches after a reconnect, on its new socket', async () => {
    const first = (batched as Redis).stream;
    const reconnected = new Promise((resolve) => batched.once('ready', resolve));
    first.destroy();
    await reconnected;
    expect((batched as Redis).stream).not.toBe(first);
    expect(await writesFor(batched)).toBeLessThan(10);
  });
});
