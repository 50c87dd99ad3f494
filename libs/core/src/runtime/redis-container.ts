/**
 * Redis in a Docker container: the embedded Redis of `tetraloop dev` on a machine that has a Docker
 * engine but no `redis-server`. It drives the `docker` CLI (nothing to install besides Docker), so
 * a production install needs no Docker library. The container is named after the data directory,
 * which it mounts, so its AOF lives where a `redis-server` of `tetraloop dev` would keep it.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { lockDataDir, waitForPing, type Appendfsync } from './redis-server.js';

/** The image `tetraloop dev` runs. */
export const REDIS_IMAGE = 'redis:7';

/** How long `docker version` may take to say whether an engine answers. */
const ENGINE_CHECK_TIMEOUT_MS = 5000;
/** How long `docker run` may take, the image pull included. */
const RUN_TIMEOUT_MS = 10 * 60_000;
/** Seconds `docker stop` gives Redis to finish its AOF before killing it. */
const STOP_GRACE_SECONDS = 10;

export type DockerEngine =
  { readonly answers: true; readonly version: string } | { readonly answers: false; readonly reason: string };

/** A `docker` command failed; `stderr` is what it said. */
export class DockerCommandError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly stderr: string,
    readonly code: string | number | null,
  ) {
    super(`docker ${args.slice(0, 2).join(' ')} failed: ${stderr.trim() || `exit ${String(code)}`}`);
    this.name = 'DockerCommandError';
  }
}

/** Runs `docker …`; resolves with its stdout, rejects with a DockerCommandError. */
function docker(binary: string, args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(binary, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (!err) return resolvePromise(stdout);
      const code = (err as NodeJS.ErrnoException).code ?? null;
      const killed = (err as { killed?: boolean }).killed === true;
      reject(
        new DockerCommandError(
          args,
          killed ? `no answer within ${timeoutMs} ms` : stderr || err.message,
          code,
        ),
      );
    });
  });
}

/**
 * Whether a Docker engine answers the `docker` CLI (`docker version` asks the server for its
 * version; with no engine it fails at once), within a few seconds.
 */
export async function dockerEngine(binary = 'docker'): Promise<DockerEngine> {
  try {
    const version = (
      await docker(binary, ['version', '--format', '{{.Server.Version}}'], ENGINE_CHECK_TIMEOUT_MS)
    ).trim();
    return { answers: true, version };
  } catch (err) {
    const failure = err as DockerCommandError;
    if (failure.code === 'ENOENT') return { answers: false, reason: `${binary} is not installed` };
    const said = failure.stderr.trim().split('\n')[0] ?? '';
    return { answers: false, reason: `no Docker engine answers (${binary} version: ${said})` };
  }
}

/**
 * The container's name for a data directory: one per directory (its absolute path, hashed), so a
 * restart finds the container a previous run left and replaces it.
 */
export function containerName(dataDir: string): string {
  return `tetraloop-redis-${createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 12)}`;
}

/** The host port of `docker port`'s answer (`127.0.0.1:49153`, one line per address). */
export function mappedPort(answer: string): number | undefined {
  for (const line of answer.split('\n')) {
    const port = /:(\d+)\s*$/.exec(line)?.[1];
    if (port) return Number(port);
  }
  return undefined;
}

export interface RedisContainerOptions {
  /** Mounted at `/data`: the AOF is kept here. */
  readonly dataDir: string;
  /** @defaultValue "everysec" */
  readonly appendfsync?: Appendfsync;
  /** @defaultValue "docker" */
  readonly binary?: string;
  /** @defaultValue REDIS_IMAGE */
  readonly image?: string;
}

export interface RedisContainer {
  readonly url: string;
  readonly name: string;
  readonly image: string;
  readonly stop: () => Promise<void>;
}

/**
 * Runs Redis in a container: AOF on in the mounted data directory, its port published on
 * 127.0.0.1 only (a free one, read back with `docker port`), as the caller's user so the files it
 * writes stay the caller's. The data directory is locked first (see `lockDataDir`); holding the
 * lock, a container of the same name can only be a leftover of a process that died, and is
 * replaced. `stop()` stops it (`--rm` removes it) and gives the directory back.
 */
export async function startRedisContainer(options: RedisContainerOptions): Promise<RedisContainer> {
  const binary = options.binary ?? 'docker';
  const image = options.image ?? REDIS_IMAGE;
  const dataDir = resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const unlock = lockDataDir(dataDir);
  const name = containerName(dataDir);
  const run = (args: readonly string[], timeoutMs = 30_000): Promise<string> =>
    docker(binary, args, timeoutMs);
  try {
    await run(['rm', '--force', name]).catch(() => undefined);
    const user =
      typeof process.getuid === 'function' && typeof process.getgid === 'function'
        ? ['--user', `${process.getuid()}:${process.getgid()}`]
        : [];
    await run(
      [
        'run',
        '--detach',
        '--rm',
        '--name',
        name,
        '--label',
        `tetraloop.data-dir=${dataDir}`,
        ...user,
        '--publish',
        '127.0.0.1::6379',
        '--volume',
        `${dataDir}:/data`,
        image,
        'redis-server',
        '--dir',
        '/data',
        '--appendonly',
        'yes',
        '--appendfsync',
        options.appendfsync ?? 'everysec',
        '--save',
        '',
        '--maxmemory-policy',
        'noeviction',
        // Reachable only through the port published on the host's loopback.
        '--protected-mode',
        'no',
      ],
      RUN_TIMEOUT_MS,
    );
    const port = mappedPort(await run(['port', name, '6379/tcp']));
    if (port === undefined) throw new Error(`docker port ${name} named no host port`);
    const url = `redis://127.0.0.1:${port}`;
    await waitForPing(url, { what: `Redis in container ${name}`, timeoutMs: 30_000 });
    let stopped: Promise<void> | undefined;
    return {
      url,
      name,
      image,
      stop() {
        stopped ??= run(
          ['stop', '--time', String(STOP_GRACE_SECONDS), name],
          (STOP_GRACE_SECONDS + 20) * 1000,
        )
          .then(() => undefined)
          .finally(unlock);
        return stopped;
      },
    };
  } catch (err) {
    await run(['rm', '--force', name]).catch(() => undefined);
    unlock();
    throw err;
  }
}
