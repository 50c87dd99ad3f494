/**
 * The plan pool: root, plan and deadline jobs of runs (`executePlanJob`), the periodic environment
 * check of sessions, the reconciler's pass over accepted runs left without a root job and over
 * failed root jobs whose runs no process settled, and the settling of a run whose root job failed
 * for good.
 */
import type { Job } from 'bullmq';
import {
  executePlanJob,
  settleAfterRootFailure,
  settleFailedRoots,
  sweepDeadlines,
} from '@tetraloop/core/executor';
import { retrying } from '@tetraloop/core/policy';
import { isCluster, isRedisUnavailable } from '@tetraloop/core/runtime';
import { reconcileQueuedRuns } from '@tetraloop/core/runs';
import type { PoolContext } from './context.js';
import { KEEP_SCHEDULES, assignedShards, type PoolDefinition } from './workers.js';

/** Periodic plan-loop job: compare session environments with what running plans have seen. */
const ENV_CHECK_JOB = 'env-check';
/** Periodic plan-loop job: enqueue accepted runs whose root job was never enqueued. */
const RECONCILE_JOB = 'reconcile';
/** How long the run of a root job that failed for good is tried to be settled (Redis away). */
const SETTLE_RETRY_FOR_MS = 10 * 60_000;

export function planPool(ctx: PoolContext): PoolDefinition {
  const { env, services } = ctx;
  const shards = assignedShards(ctx);
  if (env.TETRALOOP_WORKER_SHARDS.length > 0 && !env.TETRALOOP_WORKER_SHARDS.includes(0)) {
    ctx
      .loggerFor('plan')
      .warn(
        { shards: env.TETRALOOP_WORKER_SHARDS },
        'this plan pool does not consume shard 0, which holds the reconcile and env-check schedules: another plan worker must',
      );
  }
  // A root job that failed for good leaves its run to be settled here (see settleAfterRootFailure).
  // Nothing else would settle it, and a root job can still fail for good while Redis is away (when
  // it could not be sent back uncounted, or was too often: redis-away.ts): the settling is retried
  // with backoff while Redis is away, for up to SETTLE_RETRY_FOR_MS. The
  // retries live in this process: if it stops first, the reconciler's pass settles the run.
  const settleDeps = ctx.executorDeps('plan');
  const settleAbandoned = async (job: Job): Promise<void> => {
    try {
      const status = await retrying(
        async () => ((await job.getState()) === 'failed' ? settleAfterRootFailure(settleDeps, job) : null),
        {
          forMs: SETTLE_RETRY_FOR_MS,
          signal: settleDeps.shutdown,
          retryIf: (err) => isRedisUnavailable(err, { clustered: isCluster(ctx.connection) }),
          onRetry: (err, retry, delayMs) =>
            settleDeps.logger.warn(
              { jobId: job.id, err, retry, delayMs },
              'run of a failed root job not settled yet: retrying',
            ),
        },
      );
      if (status !== null)
        settleDeps.logger.error({ jobId: job.id, status }, 'run settled after its root job failed for good');
    } catch (err) {
      settleDeps.logger.error({ jobId: job.id, err }, 'run of a failed root job not settled');
    }
  };
  return {
    queues: shards.map((s) => ({ queue: s.plan, shard: s.shard })),
    processor: () => {
      const deps = ctx.executorDeps('plan');
      const reconcile = {
        store: services.store,
        queues: services.runQueues,
        laneHolder: (sessionKey: string) => services.sessionStore.running(sessionKey),
      };
      return async (job: Job, token?: string) => {
        if (job.name === ENV_CHECK_JOB) return services.sessions.checkEnvironment();
        if (job.name === RECONCILE_JOB) {
          const report = await reconcileQueuedRuns(reconcile, { graceMs: env.TETRALOOP_RECONCILE_GRACE_MS });
          if (report.enqueue + report.retry > 0)
            deps.logger.warn(report, 'enqueued runs left without a root job');
          // Runs whose root job failed for good and whose settling no process finished.
          const settled = await settleFailedRoots(deps);
          if (settled > 0) deps.logger.error({ settled }, 'settled runs whose root job failed for good');
          return { ...report, settled };
        }
        return executePlanJob(deps, job, token);
      };
    },
    onFailed: (job) => void settleAbandoned(job),
    // Every plan process sweeps: the first to decide a run wins, so none depends on another.
    timers: [
      {
        what: 'deadline sweep',
        everyMs: env.TETRALOOP_DEADLINE_SWEEP_MS,
        run: () => sweepDeadlines(settleDeps),
      },
    ],
    async schedule() {
      await ctx.queues.plan.upsertJobScheduler(
        'env-check',
        { every: env.TETRALOOP_ENV_CHECK_MS },
        { name: ENV_CHECK_JOB, opts: KEEP_SCHEDULES },
      );
      await ctx.queues.plan.upsertJobScheduler(
        'reconcile',
        { every: env.TETRALOOP_RECONCILE_INTERVAL_MS },
        { name: RECONCILE_JOB, opts: KEEP_SCHEDULES },
      );
    },
  };
}
