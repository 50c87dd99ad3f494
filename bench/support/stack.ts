/** Tetraloop for a benchmark: a private redis-server, the worker pools and the API, in this process. */
import { randomUUID } from 'node:crypto';
import { parseApiEnv, startApi, type ApiHandle } from '@tetraloop/api';
import { startRedisServer, type RedisServer, type RunDocument } from '@tetraloop/core';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';
import type { ExecutorHooks, Pool } from '@tetraloop/core';

export interface BenchStack {
  readonly url: string;
  readonly env: Record<string, string>;
  readonly redis: RedisServer;
  readonly api: ApiHandle;
  readonly pools: PoolsHandle | undefined;
  close(): Promise<void>;
}

export async function startBenchStack(
  env: Record<string, string> = {},
  options: { pools?: Pool[]; hooks?: ExecutorHooks } = {},
): Promise<BenchStack> {
  const redis = await startRedisServer();
  const full = {
    REDIS_URL: redis.url,
    TETRALOOP_PREFIX: `bench-${randomUUID().slice(0, 8)}`,
    LOG_LEVEL: 'silent',
    TETRALOOP_HTTP_ALLOW_HOSTS: '127.0.0.1',
    PORT: '0',
    HOST: '127.0.0.1',
    // The engine is measured; keys are measured on their own where a benchmark says so.
    TETRALOOP_AUTH: 'off',
    ...env,
  };
  const pools =
    options.pools?.length === 0
      ? undefined
      : await startPools(parseWorkerEnv(full), {
          pools: options.pools ?? ['plan', 'tool'],
          ...(options.hooks ? { hooks: options.hooks } : {}),
        });
  const api = await startApi(parseApiEnv(full));
  return {
    url: api.url,
    env: full,
    redis,
    api,
    pools,
    async close() {
      await api.close();
      await pools?.close();
      await redis.stop();
    },
  };
}

/** Submits a run and waits until it settles; returns the document and the wall time in ms. */
export async function timedRun(url: string, body: unknown): Promise<{ doc: RunDocument; wallMs: number }> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const { runId } = (await res.json()) as { runId: string };
  for (;;) {
    const wait = await fetch(`${url}/v1/runs/${runId}/wait?timeoutMs=60000`);
    const doc = (await wait.json()) as RunDocument;
    if (wait.status === 200) return { doc, wallMs: performance.now() - started };
  }
}

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export const percentile = (values: readonly number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
};

/** Describes the machine a result came from. */
export async function machine(): Promise<Record<string, unknown>> {
  const os = await import('node:os');
  return {
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  };
}
