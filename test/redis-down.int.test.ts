/** With Redis gone, the API answers 503 at once instead of hanging or failing with 500. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseApiEnv, startApi, type ApiHandle } from '@tetraloop/api';
import { startRedisServer, type RedisServer } from '@tetraloop/core';
import { postRun, testEnv } from './support/stack.js';

let redis: RedisServer;
let api: ApiHandle;

beforeAll(async () => {
  // A Redis of its own, so stopping it leaves the rest of the suite alone.
  redis = await startRedisServer();
  api = await startApi(parseApiEnv(testEnv({ REDIS_URL: redis.url })));
});
afterAll(async () => {
  await api?.close();
  await redis?.stop();
});

it('answers 503 from POST /v1/runs and /readyz when Redis is down', async () => {
  const body = { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'wait', args: { ms: 1 } }] } };
  expect((await postRun(api.url, body)).status).toBe(202);

  await redis.stop();
  const down = await postRun(api.url, body);
  expect(down.status).toBe(503);
  expect(down.body).toEqual({ error: { code: 'unavailable', message: 'Redis is unavailable' } });
  expect((await fetch(`${api.url}/readyz`)).status).toBe(503);
  expect((await fetch(`${api.url}/healthz`)).status).toBe(200);
});
