/** Long-running process types, each stopping cleanly on SIGINT/SIGTERM. */
import { join, resolve } from 'node:path';
import { ConfigError } from '@tetraloop/core/config';
import type { Pool } from '@tetraloop/core/queues';
import { startEmbeddedRedis } from '@tetraloop/core/runtime';
import { z } from 'zod';
import { parseDevEnv } from './dev-env.js';
import { devSecretKey } from './dev-secret-key.js';
import { stopTracing } from './tracing.js';

type Closer = () => Promise<void>;

// The API and the workers load only in the processes that run them: a worker never loads Express,
// the API never loads the executor (each saves its start that much; see bench/cold-start.ts).
const api = () => import('@tetraloop/api');
const workers = () => import('@tetraloop/workers');

/** Runs `closers` in reverse order on the first SIGINT/SIGTERM, then exits. */
function closeOnSignal(closers: Closer[]): void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (closing) return;
    closing = true;
    process.stderr.write(`\n${signal}: shutting down\n`);
    void (async () => {
      for (const close of [...closers].reverse()) await close().catch(() => undefined);
      await stopTracing().catch(() => undefined);
      process.exit(0);
    })();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}

export async function runApi(): Promise<void> {
  const { startApi, parseApiEnv } = await api();
  const server = await startApi(parseApiEnv());
  closeOnSignal([server.close]);
}

export async function runWorker(
  pools: Pool[],
  concurrency: number | undefined,
  metricsPort: number | undefined,
): Promise<void> {
  const { parseWorkerEnv, startHealthServer, startPools } = await workers();
  const env = parseWorkerEnv();
  const handle = await startPools(env, { pools, ...(concurrency ? { concurrency } : {}) });
  const closers: Closer[] = [handle.close];
  if (metricsPort !== undefined) {
    const health = await startHealthServer(metricsPort, handle.ready);
    // Closed after the pools, so probes see the worker until it is gone.
    closers.unshift(health.close);
    process.stderr.write(`metrics and health on port ${health.port}\n`);
  }
  // Only the plan and tool pools are bound to shards.
  const sharded = env.TETRALOOP_WORKER_SHARDS.length > 0 && pools.some((p) => p === 'plan' || p === 'tool');
  const shards = sharded ? `, shards ${env.TETRALOOP_WORKER_SHARDS.join(', ')}` : '';
  process.stderr.write(`worker ready: pools ${pools.join(', ')}${shards} (pid ${process.pid})\n`);
  closeOnSignal(closers);
}

/**
 * Everything in one process tree for a laptop: embedded Redis (unless REDIS_URL: a redis-server, or
 * a container when only Docker is there), API, all pools.
 */
export async function runDev(): Promise<void> {
  const closers: Closer[] = [];
  closeOnSignal(closers);
  try {
    await startDev(closers);
  } catch (err) {
    // Whatever started before the failure (the embedded Redis above all) must not outlive us.
    for (const close of [...closers].reverse()) await close().catch(() => undefined);
    throw err;
  }
}

async function startDev(closers: Closer[]): Promise<void> {
  const env: Record<string, string | undefined> = { ...process.env };
  const dev = parseDevEnv(env);
  // Secrets work out of the box on a laptop: a key of its own, kept with the data (one given wins).
  if (!env.TETRALOOP_SECRET_KEY) {
    const secretKey = devSecretKey(dev.TETRALOOP_DATA_DIR);
    env.TETRALOOP_SECRET_KEY = secretKey.key;
    process.stderr.write(
      secretKey.made
        ? `secret key: made ${secretKey.file} (mode 0600; secrets stored under it decrypt only with it)\n`
        : `secret key: ${secretKey.file}\n`,
    );
  }
  if (!dev.REDIS_URL) {
    const dataDir = join(dev.TETRALOOP_DATA_DIR, 'redis');
    const redis = await startEmbeddedRedis({
      dataDir: resolve(dataDir),
      appendfsync: dev.TETRALOOP_REDIS_APPENDFSYNC,
      onDocker: () => process.stderr.write('redis-server is not installed: starting Redis with Docker…\n'),
    });
    closers.push(redis.stop);
    env.REDIS_URL = redis.url;
    process.stderr.write(
      `embedded Redis: ${redis.url} (${redis.runs}; data in ${dataDir}, AOF on, appendfsync ${dev.TETRALOOP_REDIS_APPENDFSYNC})\n`,
    );
  }
  const port = env.PORT ?? '3000';
  // A laptop: no keys to make first, and nothing reachable from elsewhere unless asked for.
  env.TETRALOOP_AUTH ??= 'off';
  env.HOST ??= '127.0.0.1';
  // In dev the example graphs call the API itself, so its own address is allowed by default.
  env.TETRALOOP_HTTP_ALLOW_HOSTS ??= `localhost:${port},127.0.0.1:${port}`;
  const [{ parseWorkerEnv, startPools }, { startApi, parseApiEnv }] = await Promise.all([workers(), api()]);
  const workerEnv = parseWorkerEnv(env);
  // One process runs every pool here: a shard it skipped would have no worker at all.
  if (workerEnv.TETRALOOP_WORKER_SHARDS.length > 0) {
    throw new ConfigError(
      new z.ZodError([
        {
          code: 'custom',
          path: ['TETRALOOP_WORKER_SHARDS'],
          message: 'dev runs every pool on every shard: unset it (it is for `tetraloop worker`)',
          input: env.TETRALOOP_WORKER_SHARDS,
        },
      ]),
    );
  }
  const pools = await startPools(workerEnv, { pools: ['sense', 'plan', 'tool', 'reflect'] });
  closers.push(pools.close);
  const server = await startApi(parseApiEnv(env));
  closers.push(server.close);
  process.stderr.write(
    [
      '',
      `Tetraloop is running`,
      `  API     ${server.url}`,
      `  health  ${server.url}/healthz`,
      `  console ${server.url}/console/`,
      `  try     curl -X POST ${server.url}/v1/runs -H 'content-type: application/json' -d @examples/parallel-fetch.json`,
      env.TETRALOOP_AUTH === 'off'
        ? `  auth    OFF: anyone who reaches ${env.HOST}:${server.port} may do anything (TETRALOOP_AUTH=required to turn it on)`
        : `  auth    required: send Authorization: Bearer <key>`,
      '',
    ].join('\n') + '\n',
  );
}
