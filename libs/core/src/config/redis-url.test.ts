import { describe, expect, it } from 'vitest';
import { BaseEnv, parseEnv } from '../config/env-schema.js';
import { isClusterUrl, parseClusterUrl, redisUrlProblem } from './redis-url.js';

describe('REDIS_URL', () => {
  it('takes one Redis or a cluster by some of its nodes', () => {
    expect(redisUrlProblem('redis://127.0.0.1:6379')).toBeNull();
    expect(redisUrlProblem('rediss://user:pw@redis.example:6380/0')).toBeNull();
    expect(isClusterUrl('redis://a:1')).toBe(false);
    expect(isClusterUrl('redis+cluster://a:1,b:2')).toBe(true);
    expect(parseClusterUrl('redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002')).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      tls: false,
    });
    expect(parseClusterUrl('rediss+cluster://app:p%40ss@r1:6379,r2')).toEqual({
      nodes: [
        { host: 'r1', port: 6379 },
        { host: 'r2', port: 6379 },
      ],
      tls: true,
      username: 'app',
      password: 'p@ss',
    });
    expect(parseClusterUrl('redis+cluster://:secret@r1:6379')).toMatchObject({ password: 'secret' });
  });

  it('names what is wrong', () => {
    expect(redisUrlProblem('http://127.0.0.1:6379')).toMatch(/redis\+cluster:\/\//);
    expect(redisUrlProblem('redis+cluster://a:1,b:notaport')).toBe('"b:notaport" is not host:port');
    expect(redisUrlProblem('redis+cluster://a:1,,b:2')).toBe('"" is not host:port');
    expect(redisUrlProblem('not a url')).toBe('not a URL');
  });

  it('is checked at boot, beside the shards', () => {
    expect(() => parseEnv(BaseEnv, { REDIS_URL: 'redis+cluster://a:x' })).toThrow(/REDIS_URL/);
    expect(() => parseEnv(BaseEnv, { REDIS_URL: 'redis://a', TETRALOOP_QUEUE_SHARDS: '0' })).toThrow(
      /TETRALOOP_QUEUE_SHARDS/,
    );
    expect(
      parseEnv(BaseEnv, { REDIS_URL: 'redis+cluster://a:1,b:2', TETRALOOP_QUEUE_SHARDS: '6' }),
    ).toMatchObject({ REDIS_URL: 'redis+cluster://a:1,b:2', TETRALOOP_QUEUE_SHARDS: 6 });
  });
});
