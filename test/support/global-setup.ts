/**
 * One real Redis for the whole suite: REDIS_URL if set; else a container when a Docker engine
 * answers; else a redis-server started here on a free port. Tests isolate themselves by prefix.
 */
import { existsSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { startRedisServer } from '@tetraloop/core/runtime';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

async function fromContainer(): Promise<{ url: string; stop: () => Promise<void> } | undefined> {
  // Only ask testcontainers when an engine could be there; its runtime probing is slow otherwise.
  if (!process.env.DOCKER_HOST && !existsSync('/var/run/docker.sock')) return undefined;
  try {
    const { GenericContainer } = await import('testcontainers');
    const container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
    return {
      url: `redis://${container.getHost()}:${container.getMappedPort(6379)}`,
      stop: async () => {
        await container.stop();
      },
    };
  } catch {
    return undefined;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (process.env.REDIS_URL) {
    project.provide('redisUrl', process.env.REDIS_URL);
    return () => Promise.resolve();
  }
  const redis = (await fromContainer()) ?? (await startRedisServer());
  project.provide('redisUrl', redis.url);
  return redis.stop;
}
