/**
 * The Redis `tetraloop dev` starts when `REDIS_URL` is unset: a `redis-server` when one is
 * installed, else a container when a Docker engine answers, else an error saying how to get one.
 */
import { dockerEngine, startRedisContainer, REDIS_IMAGE } from './redis-container.js';
import { hasRedisServer, startRedisServer, type Appendfsync } from './redis-server.js';

/** Neither `redis-server` nor a Docker engine is there to run Redis with. */
export class NoRedisError extends Error {
  constructor(
    readonly binary: string,
    readonly docker: string,
  ) {
    super(
      [
        `no Redis to start: ${binary} is not installed, and ${docker}. Do one of:`,
        `  - install redis-server (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis)`,
        `  - install or start Docker (tetraloop dev then runs Redis in a ${REDIS_IMAGE} container)`,
        `  - point Tetraloop at a running Redis: REDIS_URL=redis://host:6379`,
      ].join('\n'),
    );
    this.name = 'NoRedisError';
  }
}

export interface EmbeddedRedisOptions {
  /** Where the AOF is kept (locked while in use, see `lockDataDir`). */
  readonly dataDir: string;
  /** @defaultValue "everysec" */
  readonly appendfsync?: Appendfsync;
  /** @defaultValue "redis-server" */
  readonly redisServer?: string;
  /** @defaultValue "docker" */
  readonly docker?: string;
  /** Called before the container is started (pulling the image can take a while). */
  readonly onDocker?: () => void;
}

export interface EmbeddedRedis {
  readonly url: string;
  /** What runs it, for a person: `redis-server (pid 123)` or `Docker container … (redis:7)`. */
  readonly runs: string;
  readonly stop: () => Promise<void>;
}

export async function startEmbeddedRedis(options: EmbeddedRedisOptions): Promise<EmbeddedRedis> {
  const binary = options.redisServer ?? 'redis-server';
  const appendfsync = options.appendfsync ?? 'everysec';
  if (hasRedisServer(binary)) {
    const server = await startRedisServer({ dataDir: options.dataDir, appendfsync, binary });
    return { url: server.url, runs: `redis-server (pid ${server.pid})`, stop: server.stop };
  }
  const docker = options.docker ?? 'docker';
  const engine = await dockerEngine(docker);
  if (!engine.answers) throw new NoRedisError(binary, engine.reason);
  options.onDocker?.();
  const container = await startRedisContainer({ dataDir: options.dataDir, appendfsync, binary: docker });
  return {
    url: container.url,
    runs: `Docker container ${container.name} (${container.image})`,
    stop: container.stop,
  };
}
