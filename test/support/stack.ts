/** A whole Tetraloop (API + worker pools) in the test process, on the suite's Redis, under its own prefix. */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { parseApiEnv, startApi, type ApiHandle } from '@tetraloop/api';
import type { ExecutorHooks, Pool, RunDocument, RunEvent } from '@tetraloop/core';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';

export interface Stack {
  readonly url: string;
  readonly prefix: string;
  readonly env: Record<string, string>;
  readonly api: ApiHandle;
  readonly pools: PoolsHandle | undefined;
  close(): Promise<void>;
}

export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL: inject('redisUrl'),
    TETRALOOP_PREFIX: `test-${randomUUID()}`,
    LOG_LEVEL: 'silent',
    TETRALOOP_HTTP_ALLOW_HOSTS: '127.0.0.1',
    PORT: '0',
    HOST: '127.0.0.1',
    ...overrides,
  };
}

export async function startStack(
  options: { env?: Record<string, string>; pools?: Pool[]; hooks?: ExecutorHooks } = {},
): Promise<Stack> {
  const env = testEnv(options.env);
  const pools =
    options.pools?.length === 0
      ? undefined
      : await startPools(parseWorkerEnv(env), {
          pools: options.pools ?? ['plan', 'tool'],
          ...(options.hooks ? { hooks: options.hooks } : {}),
        });
  const api = await startApi(parseApiEnv(env));
  return {
    url: api.url,
    prefix: env.TETRALOOP_PREFIX!,
    env,
    api,
    pools,
    async close() {
      await api.close();
      await pools?.close();
    },
  };
}

export async function postRun(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Submits a run and waits for it to settle; fails the test if it is not accepted. */
export async function runToEnd(url: string, body: unknown): Promise<RunDocument> {
  const posted = await postRun(url, body);
  if (posted.status !== 202) throw new Error(`run not accepted: ${JSON.stringify(posted.body)}`);
  return waitFor(url, posted.body.runId as string);
}

export async function waitFor(url: string, runId: string, timeoutMs = 20_000): Promise<RunDocument> {
  const res = await fetch(`${url}/v1/runs/${runId}/wait?timeoutMs=${timeoutMs}`);
  const doc = (await res.json()) as RunDocument;
  if (res.status !== 200) throw new Error(`run ${runId} did not settle: ${JSON.stringify(doc.nodes)}`);
  return doc;
}

/** Reads a run's server-sent events until the server closes the stream. */
export async function readEvents(
  url: string,
  runId: string,
  lastEventId?: number,
): Promise<{ id: number; event: string; data: RunEvent }[]> {
  const res = await fetch(`${url}/v1/runs/${runId}/events`, {
    headers: lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) },
  });
  if (res.status !== 200) throw new Error(`events answered ${res.status}`);
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('id:'))
    .map((block) => {
      const field = (name: string): string => block.match(new RegExp(`^${name}: ?(.*)$`, 'm'))?.[1] ?? '';
      return { id: Number(field('id')), event: field('event'), data: JSON.parse(field('data')) as RunEvent };
    });
}

export async function post(
  url: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    ...(body === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Resolves once a session's lane holds no run and nothing waits in it (its replies are written by then). */
export async function laneIdle(url: string, sessionKey: string): Promise<void> {
  for (;;) {
    const view = (await fetch(`${url}/v1/sessions/${sessionKey}`).then((r) => r.json())) as {
      running: string | null;
      queued: unknown[];
    };
    if (!view.running && view.queued.length === 0) return;
    // Block on the running run when there is one; else wait briefly on the API itself.
    const target =
      view.running && view.running !== 'collect' ? view.running : '00000000-0000-4000-8000-000000000000';
    await fetch(`${url}/v1/runs/${target}/wait?timeoutMs=100`);
  }
}
