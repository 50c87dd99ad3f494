import { ConfigError } from '@tetraloop/core/config';
import { describe, expect, it } from 'vitest';
import { parseWorkerEnv } from './env.js';

const REDIS = { REDIS_URL: 'redis://127.0.0.1:6379' };

describe('the worker environment', () => {
  it('refuses a retry delay floor under 0.5 s, naming the variable', () => {
    expect(() => parseWorkerEnv({ ...REDIS, TETRALOOP_BACKOFF_MIN_MS: '0' })).toThrow(ConfigError);
    expect(() => parseWorkerEnv({ ...REDIS, TETRALOOP_BACKOFF_MIN_MS: '499' })).toThrow(
      /TETRALOOP_BACKOFF_MIN_MS/,
    );
    expect(parseWorkerEnv({ ...REDIS, TETRALOOP_BACKOFF_MIN_MS: '500' }).TETRALOOP_BACKOFF_MIN_MS).toBe(500);
    expect(parseWorkerEnv(REDIS).TETRALOOP_BACKOFF_MIN_MS).toBe(500);
  });

  it('takes the shards a worker consumes, each below TETRALOOP_QUEUE_SHARDS, naming the variable', () => {
    expect(parseWorkerEnv(REDIS).TETRALOOP_WORKER_SHARDS).toEqual([]);
    const env = { ...REDIS, TETRALOOP_QUEUE_SHARDS: '3' };
    expect(parseWorkerEnv({ ...env, TETRALOOP_WORKER_SHARDS: '2, 0,2' }).TETRALOOP_WORKER_SHARDS).toEqual([
      2, 0,
    ]);
    expect(() => parseWorkerEnv({ ...env, TETRALOOP_WORKER_SHARDS: '3' })).toThrow(
      /TETRALOOP_WORKER_SHARDS: shard 3 does not exist: TETRALOOP_QUEUE_SHARDS is 3/,
    );
    expect(() => parseWorkerEnv({ ...env, TETRALOOP_WORKER_SHARDS: '3,4' })).toThrow(
      /shards 3 and 4 do not exist/,
    );
    for (const bad of ['one', '-1', '1.0', '0x1', '1e0', ',', '0,,1']) {
      expect(() => parseWorkerEnv({ ...env, TETRALOOP_WORKER_SHARDS: bad }), bad).toThrow(
        /TETRALOOP_WORKER_SHARDS: shard indexes/,
      );
    }
  });
});
