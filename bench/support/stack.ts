/** Tetraloop for a benchmark: a private redis-server, the worker pools and the API, in this process. */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { parseApiEnv, startApi, type ApiHandle } from '@tetraloop/api';
import { TetraloopClient, type RunDocument, type RunRequest } from '@tetraloop/client';
import type { ExecutorHooks } from '@tetraloop/core/executor';
import type { Pool } from '@tetraloop/core/queues';
import { startRedisServer, type RedisServer } from '@tetraloop/core/runtime';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';

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
    // Settings from the shell (e.g. `TETRALOOP_NODE_HANDOFF=0 npm run bench -- per-hop`), then the benchmark's own.
    ...tetraloopSettings(process.env),
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

/** The `TETRALOOP_*` variables of an environment. */
function tetraloopSettings(from: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(from).filter(
      (e): e is [string, string] => e[0].startsWith('TETRALOOP_') && e[1] !== undefined,
    ),
  );
}

const clients = new Map<string, TetraloopClient>();

/** The API client of a bench stack's URL (one per URL). */
export function clientOf(url: string): TetraloopClient {
  let client = clients.get(url);
  if (!client) clients.set(url, (client = new TetraloopClient({ baseUrl: url })));
  return client;
}

/**
 * Submits a run and waits until it settles; returns the document and the wall time in ms. The body
 * is any run request a benchmark builds: the API checks it.
 */
export async function timedRun(url: string, body: unknown): Promise<{ doc: RunDocument; wallMs: number }> {
  const started = performance.now();
  const client = clientOf(url);
  const { runId } = await client.submit(body as RunRequest);
  const doc = await client.wait(runId, Infinity, { sliceMs: 60_000 });
  return { doc, wallMs: performance.now() - started };
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

/** Queues a run's work goes through: its root job's and its `json` nodes' (the default tool queue). */
const RUN_QUEUES = ['plan', 'tool'];

/**
 * Resolves once the stack's plan and tool queues hold no job waiting, running or waiting for its
 * children. A run settles from its last node's job, before that job has finished and before its
 * root job's last pass: that work is the batch's too, so a measured batch ends when it is done.
 */
export async function queuesDrained(stack: BenchStack): Promise<void> {
  const connection = new Redis(stack.env.REDIS_URL!, { maxRetriesPerRequest: null });
  const queues = RUN_QUEUES.map(
    (name) => new Queue(name, { connection, prefix: stack.env.TETRALOOP_PREFIX }),
  );
  try {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
      const counts = await Promise.all(
        queues.map((q) => q.getJobCounts('wait', 'active', 'waiting-children', 'prioritized')),
      );
      if (counts.every((c) => Object.values(c).every((n) => n === 0))) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('the run queues did not drain within 60 s');
  } finally {
    await Promise.all(queues.map((q) => q.close()));
    connection.disconnect();
  }
}
