/**
 * The sense pool: session messages and sources (`executeSenseJob`), polled sources on their
 * schedules, the periodic sweep of session lanes, deliveries of outbound webhooks and the firings
 * of the tenants' schedules.
 */
import type { Job } from 'bullmq';
import { webhookDeliveryOf } from '@tetraloop/core/config';
import { SENSE_JOB, executeSenseJob, statusKindOf } from '@tetraloop/core/sessions';
import { egressClient } from '@tetraloop/core/tools';
import type { PoolContext } from './context.js';
import { KEEP_SCHEDULES, type PoolDefinition } from './workers.js';

export function sensePool(ctx: PoolContext): PoolDefinition {
  const { env, services, queues } = ctx;
  const polled = new Map(env.TETRALOOP_SOURCES.map((s) => [s.name, s]));
  return {
    queues: [{ queue: queues.sense, shard: 0 }],
    processor: () => {
      const deps = {
        sessions: services.sessions,
        sources: services.sources,
        schedules: services.schedules,
        triggers: services.firing,
        polled,
        // Deliveries go through the egress policy the http tool and polled sources are held to.
        webhooks: {
          runs: services.store,
          webhooks: services.webhooks,
          egress: egressClient(ctx.egress),
          settings: webhookDeliveryOf(env, env.TETRALOOP_BACKOFF_JITTER),
          logger: ctx.loggerFor('sense'),
        },
      };
      return (job: Job) => executeSenseJob(deps, job);
    },
    async schedule() {
      await queues.sense.upsertJobScheduler(
        'lane-sweep',
        { every: env.TETRALOOP_LANE_SWEEP_MS },
        { name: SENSE_JOB.laneSweep, opts: KEEP_SCHEDULES },
      );
      for (const source of polled.values()) {
        await services.sources.register(source.name, statusKindOf(source), source.tenant);
        await queues.sense.upsertJobScheduler(
          `poll:${source.name}`,
          { every: source.intervalMs },
          { name: SENSE_JOB.poll, data: { source: source.name }, opts: KEEP_SCHEDULES },
        );
      }
    },
  };
}
