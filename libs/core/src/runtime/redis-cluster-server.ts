/**
 * Starts a private Redis Cluster on loopback: `masters` redis-servers with `--cluster-enabled yes`
 * on free ports, each in a temporary directory, joined by `redis-cli --cluster create` with no
 * replicas (the slots divided evenly, in port order). For the cluster tests and `npm run bench --
 * cluster`; a real deployment runs a managed or operator-run cluster.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, hasRedisServer, RedisServerMissingError, waitForPing } from './redis-server.js';

export interface RedisClusterServer {
  /** `redis+cluster://127.0.0.1:<port>,…`: what REDIS_URL takes. */
  readonly url: string;
  /** Each master's own `redis://` URL, in port order (slot ranges ascending). */
  readonly masters: readonly string[];
  readonly pids: readonly number[];
  readonly stop: () => Promise<void>;
}

export interface RedisClusterOptions {
  /** @defaultValue 3 (the fewest Redis Cluster accepts) */
  readonly masters?: number;
  readonly binary?: string;
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterServer> {
  const binary = options.binary ?? 'redis-server';
  if (!hasRedisServer(binary)) throw new RedisServerMissingError(binary);
  const count = options.masters ?? 3;
  const dir = mkdtempSync(join(tmpdir(), 'tetraloop-cluster-'));
  const ports: number[] = [];
  // Free ports one at a time, so two asks cannot answer the same one. The cluster bus port is
  // port + 10000: a port above 55535 has none, so ask again.
  while (ports.length < count) {
    const port = await freePort();
    if (port <= 55_535 && !ports.includes(port)) ports.push(port);
  }
  const children = ports.map((port) =>
    spawn(
      binary,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
        '--maxmemory-policy',
        'noeviction',
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    ),
  );
  const exits = children.map((child) => new Promise<void>((resolve) => child.once('exit', () => resolve())));
  const stop = async (): Promise<void> => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    }
    await Promise.all(exits);
    rmSync(dir, { recursive: true, force: true });
  };
  const masters = ports.map((port) => `redis://127.0.0.1:${port}`);
  try {
    await Promise.all(
      masters.map((url, i) => waitForPing(url, { exited: exits[i]!, what: 'redis-server (cluster node)' })),
    );
    const create = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
    await Promise.all(masters.map((url) => clusterOk(url)));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`,
    masters,
    pids: children.map((c) => c.pid ?? -1),
    stop,
  };
}

/** Resolves once the node at `url` says the cluster is ok (every slot served), or rejects after 10 s. */
async function clusterOk(url: string): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if ((await client.cluster('INFO')).includes('cluster_state:ok')) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`cluster at ${url} not ok after 10 s`);
  } finally {
    client.disconnect();
  }
}
