/**
 * Submits runs and waits for them through the library, the way the API's handlers do it, without
 * HTTP in between: the Tetraloop counterpart of a BullMQ producer calling `Queue.addBulk`.
 */
import { Queue } from 'bullmq';
import {
  RunRequest,
  RunWaiter,
  buildServices,
  builtinTools,
  connectRedis,
  createLogger,
  parseAllowHosts,
  type BaseEnv,
  type RunService,
} from '@tetraloop/core';

export interface LibraryDriver {
  submit(body: unknown): Promise<string>;
  /** Resolves once the run has settled, with its status. */
  settle(runId: string): Promise<string>;
  close(): Promise<void>;
}

export async function libraryDriver(env: BaseEnv): Promise<LibraryDriver> {
  const redis = connectRedis(env.REDIS_URL, 'worker', 'bench-driver');
  const subscriber = connectRedis(env.REDIS_URL, 'subscriber', 'bench-driver-sub');
  const prefix = env.TETRALOOP_PREFIX;
  const queues = {
    plan: new Queue('plan', { connection: redis, prefix }),
    tool: new Queue('tool', { connection: redis, prefix }),
    sense: new Queue('sense', { connection: redis, prefix }),
  };
  const logger = createLogger({ level: 'silent', layer: 'api', redact: [] });
  const tools = builtinTools({ egress: parseAllowHosts('') });
  const services = buildServices(env, redis, queues, tools, undefined, logger);
  const runs: RunService = services.runs;
  const waiter = await RunWaiter.listen(subscriber, services.store.channels.settled);
  return {
    async submit(body) {
      return (await runs.submit(RunRequest.parse(body))).runId;
    },
    async settle(runId) {
      while (!(await waiter.wait(runId, 60_000, async () => (await runs.settled(runId)) === true)));
      return (await services.store.status(runId)) ?? 'unknown';
    },
    async close() {
      await Promise.all(Object.values(queues).map((q) => q.close()));
      await waiter.close();
      redis.disconnect();
    },
  };
}
