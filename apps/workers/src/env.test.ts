import { ConfigError } from '@tetraloop/core';
import { describe, expect, it } from 'vitest';
import { parseWorkerEnv } from './env.js';

const REDIS = { REDIS_URL: 'redis://127.0.0.1:6379' };

describe('the worker environment', () => {
  it('refuses a retry delay floor under 100 ms, naming the variable', () => {
    expect(() => parseWorkerEnv({ ...REDIS, TETRALOOP_BACKOFF_MIN_MS: '0' })).toThrow(ConfigError);
    expect(() => parseWorkerEnv({ ...REDIS, TETRALOOP_BACKOFF_MIN_MS: '99' })).toThrow(
      /TETRALOOP_BACKOFF_MIN_MS/,
    );
    expect(parseWorkerEnv({ ...REDIS, TETRALOOP_BACKOFF_MIN_MS: '100' }).TETRALOOP_BACKOFF_MIN_MS).toBe(100);
    expect(parseWorkerEnv(REDIS).TETRALOOP_BACKOFF_MIN_MS).toBe(500);
  });
});
