/**
 * The tool pool: node jobs (`executeNodeJob`: a node's tool or model calls, waits and loops) and
 * carrier jobs (`executeCarrierJob`: a new run's first nodes, started together), its
 * calls held to flow control, whose tick runs while the pool does; and the custom tool calls
 * agents and loops of other processes send to its queues (`executeToolCallJob`).
 */
import type { Job } from 'bullmq';
import { executeCarrierJob, executeNodeJob, executeToolCallJob } from '@tetraloop/core/executor';
import { JOB } from '@tetraloop/core/queues';
import type { PoolContext } from './context.js';
import { assignedShards, type PoolDefinition } from './workers.js';

export function nodePool(ctx: PoolContext): PoolDefinition {
  return {
    // Each shard's queue of every tool queue this process serves (`default`: the node queue).
    queues: assignedShards(ctx).flatMap((s) =>
      ctx.servedQueues.map((name) => ({ queue: s.toolQueue(name), shard: s.shard })),
    ),
    processor: () => {
      const deps = { ...ctx.executorDeps('tool'), flow: ctx.flow };
      ctx.flow.start();
      return (job: Job, token?: string) =>
        job.name === JOB.call
          ? executeToolCallJob(deps, job, token)
          : job.name === JOB.carry
            ? executeCarrierJob(deps, job, token)
            : executeNodeJob(deps, job, token);
    },
  };
}
