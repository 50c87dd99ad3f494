/**
 * Starts a private `redis-server` on a free loopback port: the embedded Redis of `tetraloop dev`
 * (see `embedded-redis.ts` for its Docker fallback) and the test suite's fallback when there is no
 * `REDIS_URL` and no Docker engine.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

export interface RedisServer {
  readonly url: string;
  readonly pid: number;
  readonly stop: () => Promise<void>;
}

/** When Redis fsyncs its AOF: once a second, or before it answers each write. */
export const APPENDFSYNC_POLICIES = ['everysec', 'always'] as const;
export type Appendfsync = (typeof APPENDFSYNC_POLICIES)[number];

export interface RedisServerOptions {
  /** Data directory; with it, AOF persistence is on. Without it, nothing is persisted. */
  readonly dataDir?: string;
  /** With a data directory: the AOF's fsync policy. @defaultValue "everysec" */
  readonly appendfsync?: Appendfsync;
  readonly binary?: string;
  /** Loopback port to listen on (default: a free one), e.g. to restart a server where it was. */
  readonly port?: number;
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

/** Another live process runs a Redis on this data directory (two AOF writers would corrupt it). */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: number,
  ) {
    super(
      `${dataDir} is in use by process ${holder} (another tetraloop dev?): stop it, or give this one its own directory with TETRALOOP_DATA_DIR`,
    );
    this.name = 'DataDirLockedError';
  }
}

const LOCK_FILE = 'tetraloop.lock';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * Takes the data directory for this process: a lock file created exclusively, holding our pid. A
 * lock left by a process that is gone is taken over. Answers the function that gives it back.
 */
export function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, LOCK_FILE);
  for (let tries = 0; tries < 2; tries++) {
    try {
      writeFileSync(path, String(process.pid), { flag: 'wx' });
      return () => {
        try {
          if (readFileSync(path, 'utf8') === String(process.pid)) unlinkSync(path);
        } catch {
          // Already gone.
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(readFileSync(path, 'utf8'));
      if (Number.isInteger(holder) && holder > 0 && alive(holder)) {
        throw new DataDirLockedError(dataDir, holder);
      }
      // Stale: its process is gone.
      unlinkSync(path);
    }
  }
  throw new DataDirLockedError(dataDir, -1);
}

export function hasRedisServer(binary = 'redis-server'): boolean {
  return spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Whether `port` can be bound on 127.0.0.1 now. */
export const canBind = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

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
  const port = options.port ?? (await freePort());
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
  let unlock = (): void => undefined;
  if (options.dataDir) {
    mkdirSync(options.dataDir, { recursive: true });
    unlock = lockDataDir(options.dataDir);
    args.push(
      '--dir',
      options.dataDir,
      '--appendonly',
      'yes',
      '--appendfsync',
      options.appendfsync ?? 'everysec',
    );
  } else {
    args.push('--appendonly', 'no');
  }
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const url = `redis://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(unlock);
  await waitForPing(url, { exited, what: 'redis-server' }).catch((err: unknown) => {
    unlock();
    throw err;
  });
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

/**
 * Resolves once the Redis at `url` answers PING; rejects when `exited` resolves first (the
 * server's process ended) or after `timeoutMs`.
 */
export async function waitForPing(
  url: string,
  options: { exited?: Promise<void>; what: string; timeoutMs?: number },
): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  // Refused connections are expected until the server listens.
  client.on('error', () => undefined);
  let dead = false;
  void options.exited?.then(() => (dead = true));
  const deadline = Date.now() + (options.timeoutMs ?? 5000);
  try {
    while (Date.now() < deadline && !dead) {
      try {
        if (client.status === 'wait') await client.connect();
        await client.ping();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    throw new Error(
      dead ? `${options.what} exited during startup` : `${options.what} did not answer PING in time`,
    );
  } finally {
    client.disconnect();
  }
}
