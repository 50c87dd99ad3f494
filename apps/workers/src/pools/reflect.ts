/**
 * The reflect pool: reflections over agents' recent runs and the periodic sweep that asks for them
 * (`executeReflectJob`). With the reflect loop off (`TETRALOOP_REFLECT=off`) its Workers refuse
 * anything they get and nothing is scheduled.
 */
import { UnrecoverableError, type Job } from 'bullmq';
import { lifecycleOf, ruleSettingsOf } from '@tetraloop/core/config';
import { REFLECT_JOB } from '@tetraloop/core/queues';
import { executeReflectJob } from '@tetraloop/core/reflect';
import type { PoolContext } from './context.js';
import { KEEP_SCHEDULES, type PoolDefinition } from './workers.js';

export function reflectPool(ctx: PoolContext): PoolDefinition {
  const { env, queues } = ctx;
  const memory = ctx.services.memory;
  return {
    queues: [{ queue: queues.reflect, shard: 0 }],
    processor: () => {
      if (!memory) return unknownJob;
      const deps = {
        memory: memory.store,
        reflectQueue: queues.reflect,
        rules: ruleSettingsOf(env),
        lifecycle: lifecycleOf(env),
        logger: ctx.loggerFor('reflect'),
      };
      return (job: Job) => executeReflectJob(deps, job);
    },
    async schedule() {
      if (!memory) return;
      await queues.reflect.upsertJobScheduler(
        'reflect-sweep',
        { every: env.TETRALOOP_REFLECT_INTERVAL_MS },
        { name: REFLECT_JOB.sweep, opts: KEEP_SCHEDULES },
      );
    },
  };
}

function unknownJob(job: Job): Promise<never> {
  return Promise.reject(new UnrecoverableError(`no handler for job "${job.name}" yet`));
}
