/**
 * Starts a private `redis-server` on a free loopback port: the embedded Redis of `tetraloop dev`
 * and the test suite's fallback when there is no `REDIS_URL` and no Docker engine.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

export interface RedisServer {
  readonly url: string;
  readonly pid: number;
  readonly stop: () => Promise<void>;
}

export interface RedisServerOptions {
  /** Data directory; with it, AOF persistence is on. Without it, nothing is persisted. */
  readonly dataDir?: string;
  readonly binary?: string;
}

export class RedisServerMissingError extends Error {
  constructor(binary: string) {
    super(
      `${binary} is not installed. Install it (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis) ` +
        'or point Tetraloop at a running Redis with REDIS_URL=redis://host:6379.',
    );
    this.name = 'RedisServerMissingError';
  }
}

export function hasRedisServer(binary = 'redis-server'): boolean {
  return spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = options.binary ?? 'redis-server';
  if (!hasRedisServer(binary)) throw new RedisServerMissingError(binary);
  const port = await freePort();
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--maxmemory-policy',
    'noeviction',
  ];
  if (options.dataDir) {
    mkdirSync(options.dataDir, { recursive: true });
    args.push('--dir', options.dataDir, '--appendonly', 'yes', '--appendfsync', 'everysec');
  } else {
    args.push('--appendonly', 'no');
  }
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const url = `redis://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitForPing(url, exited);
  return {
    url,
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function waitForPing(url: string, exited: Promise<void>): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  // Refused connections are expected until the server listens.
  client.on('error', () => undefined);
  let dead = false;
  void exited.then(() => (dead = true));
  try {
    for (let i = 0; i < 200 && !dead; i++) {
      try {
        if (client.status === 'wait') await client.connect();
        await client.ping();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    throw new Error(dead ? 'redis-server exited during startup' : 'redis-server did not answer PING in time');
  } finally {
    client.disconnect();
  }
}
