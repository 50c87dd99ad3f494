/**
 * Starts a private Redis Cluster on loopback: `masters` redis-servers with `--cluster-enabled yes`
 * on free ports, each in a temporary directory, joined by `redis-cli --cluster create` (the slots
 * divided evenly, in port order), with `replicas` replicas of each master when asked. For the
 * cluster tests and `npm run bench -- cluster`; a real deployment runs a managed or operator-run
 * cluster.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { canBind, freePort, hasRedisServer, RedisServerMissingError, waitForPing } from './redis-server.js';

export interface RedisClusterServer {
  /** `redis+cluster://127.0.0.1:<port>,…`: what REDIS_URL takes. */
  readonly url: string;
  /** Each master's own `redis://` URL, in port order (slot ranges ascending), as created. */
  readonly masters: readonly string[];
  /** The replicas of each master (index-aligned with `masters`), as created; empty without replicas. */
  readonly replicas: readonly (readonly string[])[];
  /** Every node's `redis://` URL in port order, and its process id (index-aligned). */
  readonly nodes: readonly string[];
  readonly pids: readonly number[];
  readonly stop: () => Promise<void>;
}

export interface RedisClusterOptions {
  /** @defaultValue 3 (the fewest Redis Cluster accepts) */
  readonly masters?: number;
  /** Replicas of each master. @defaultValue 0 */
  readonly replicas?: number;
  /**
   * How long a node may be unreachable before the others call it failed (`cluster-node-timeout`).
   * @defaultValue 15000 (Redis's own)
   */
  readonly nodeTimeoutMs?: number;
  readonly binary?: string;
}

/** How often the cluster is started afresh when a node exits as it starts. */
const START_ATTEMPTS = 3;

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterServer> {
  const binary = options.binary ?? 'redis-server';
  if (!hasRedisServer(binary)) throw new RedisServerMissingError(binary);
  // A port found free can be taken before its node binds it (or its bus port, by any process's
  // outgoing connection): that node exits, and the cluster starts again on other ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startClusterOnce(binary, options);
    } catch (err) {
      if (!(err instanceof NodeExitedError) || attempt >= START_ATTEMPTS) throw err;
    }
  }
}

/** A cluster node's process ended before it answered. */
class NodeExitedError extends Error {}

async function startClusterOnce(binary: string, options: RedisClusterOptions): Promise<RedisClusterServer> {
  const masterCount = options.masters ?? 3;
  const replicaCount = options.replicas ?? 0;
  const count = masterCount * (1 + replicaCount);
  const dir = mkdtempSync(join(tmpdir(), 'tetraloop-cluster-'));
  const ports: number[] = [];
  // Free ports one at a time, so two asks cannot answer the same one. The cluster bus port is
  // port + 10000: a port above 55535 has none, and one whose bus port is taken would not start,
  // so ask again.
  while (ports.length < count) {
    const port = await freePort();
    if (port <= 55_535 && !ports.includes(port) && (await canBind(port + 10_000))) ports.push(port);
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
        '--cluster-node-timeout',
        String(options.nodeTimeoutMs ?? 15_000),
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    ),
  );
  const exits = children.map((child) => new Promise<void>((resolve) => child.once('exit', () => resolve())));
  // The nodes go with this process when it exits without stopping them (a test run cut short by
  // a timeout or an uncaught error); a process killed by a signal it does not handle leaves them.
  const killAll = (): void => {
    for (const child of children) child.kill('SIGKILL');
  };
  process.once('exit', killAll);
  const stop = async (): Promise<void> => {
    process.off('exit', killAll);
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    }
    await Promise.all(exits);
    rmSync(dir, { recursive: true, force: true });
  };
  const nodes = ports.map((port) => `redis://127.0.0.1:${port}`);
  let masters: string[] = nodes;
  let replicas: string[][] = [];
  try {
    await Promise.all(
      nodes.map((url, i) =>
        waitForPing(url, { exited: exits[i]!, what: 'redis-server (cluster node)' }).catch((err: unknown) => {
          const child = children[i]!;
          throw child.exitCode !== null || child.signalCode !== null
            ? new NodeExitedError(err instanceof Error ? err.message : String(err))
            : err;
        }),
      ),
    );
    const create = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(replicaCount),
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
    await Promise.all(nodes.map((url) => clusterOk(url)));
    if (replicaCount > 0) [masters, replicas] = await roles(nodes[0]!, replicaCount);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`,
    masters,
    replicas,
    nodes,
    pids: children.map((c) => c.pid ?? -1),
    stop,
  };
}

/**
 * The masters in slot order and each one's replicas, from `CLUSTER NODES`, once every replica's
 * link to its master is up (it has synced), or rejects after 10 s.
 */
async function roles(url: string, replicaCount: number): Promise<[string[], string[][]]> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const lines = String(await client.cluster('NODES'))
        .trim()
        .split('\n')
        .map((line) => line.split(' '));
      // <id> <ip:port@cport> <flags> <master id> <ping> <pong> <epoch> <link> <slot ranges...>
      const urlOf = (address: string): string => `redis://${address.split('@')[0]}`;
      const masters = lines
        .filter((f) => f[2]!.includes('master') && f[8] !== undefined)
        .sort((a, b) => Number(a[8]!.split('-')[0]) - Number(b[8]!.split('-')[0]));
      const replicas = masters.map((m) =>
        lines.filter((f) => f[2]!.includes('slave') && f[3] === m[0]).map((f) => urlOf(f[1]!)),
      );
      const synced = await Promise.all(replicas.flat().map((r) => replicaSynced(r)));
      if (replicas.every((r) => r.length === replicaCount) && synced.every(Boolean)) {
        return [masters.map((m) => urlOf(m[1]!)), replicas];
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the replicas of the cluster at ${url} did not sync within 10 s`);
  } finally {
    client.disconnect();
  }
}

async function replicaSynced(url: string): Promise<boolean> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    return (await client.info('replication')).includes('master_link_status:up');
  } finally {
    client.disconnect();
  }
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
