/**
 * A job that fails because Redis is away — an outage, a cluster failover, a server busy with a
 * long script — goes back to its queue without using up an attempt. BullMQ counts every error a
 * processor throws: a node job with one attempt that met a `CLUSTERDOWN` while it completed would
 * fail for good, and its run end `node_lost`, though nothing was wrong with the node. Instead the
 * job moves to the delayed set (its lock still held) and runs again after the retry backoff, as
 * the same attempt: what a stall redelivery does after a crash, without waiting for the lock to
 * lapse. Every processor already takes a redelivery (snapshots written stay, a completed node
 * reports its snapshot, a begun one re-enters its attempt), so this adds no new way for a job to
 * run twice. The times a job went back are kept in its data (`redisAway`): past the limit the
 * failure counts, so an error wrongly read as Redis away cannot send a job back forever.
 */
import { DelayedError, type Job, type Processor } from 'bullmq';
import type { Logger } from '@tetraloop/core/logging';
import { DEFAULT_BACKOFF, retryDelay, retrying } from '@tetraloop/core/policy';
import { isRedisUnavailable } from '@tetraloop/core/runtime';
import { metrics } from '@tetraloop/core/telemetry';

export interface RedisAwayOptions {
  /** The pool's connection is a Redis Cluster client (redirections it could not follow count). */
  readonly clustered: boolean;
  /** How many times one job may go back (TETRALOOP_REDIS_AWAY_MAX_DEFERRALS). */
  readonly maxDeferrals: number;
  readonly log: Logger;
  /** The queue's name, for the metric. */
  readonly queue: string;
  /** The process shuts down: the move is not retried any more. */
  readonly shutdown?: AbortSignal;
  /**
   * How long the move to the delayed set is retried while Redis is still away. The job's lock
   * lapses once Redis has been away for about a lock duration (10 s by default): the move then
   * fails on the lock, and the job comes back as stalled instead.
   * @defaultValue 60 s
   */
  readonly moveForMs?: number;
}

const MOVE_FOR_MS = 60_000;
/** How many times a job went back while Redis was away, in its data. */
const DEFERRALS_FIELD = 'redisAway';

const deferralsOf = (job: Job): number => {
  const n = (job.data as Record<string, unknown> | null)?.[DEFERRALS_FIELD];
  return typeof n === 'number' ? n : 0;
};

/** `processor`, with its Redis-away failures sent back to the queue uncounted. */
export function deferWhileRedisAway(processor: Processor, options: RedisAwayOptions): Processor {
  const { clustered, log, queue } = options;
  const away = (err: unknown): boolean => isRedisUnavailable(err, { clustered });
  return async (job: Job, token?: string, signal?: AbortSignal) => {
    try {
      return (await processor(job, token, signal)) as unknown;
    } catch (err) {
      if (token === undefined || !away(err)) throw err;
      const deferrals = deferralsOf(job) + 1;
      if (deferrals > options.maxDeferrals) {
        log.warn(
          { jobId: job.id, err, deferrals },
          'Redis away again: the job has gone back often enough, its attempt counts',
        );
        throw err;
      }
      log.warn({ jobId: job.id, err }, 'Redis away: the job goes back to its queue, its attempt not counted');
      // The retry backoff (1 s doubling to 30 s, ±20 %): the redeliveries of many jobs spread out.
      const delayMs = retryDelay(deferrals, {}, DEFAULT_BACKOFF);
      const retry = {
        forMs: options.moveForMs ?? MOVE_FOR_MS,
        retryIf: away,
        ...(options.shutdown ? { signal: options.shutdown } : {}),
      };
      try {
        // Sent once Redis answers again; until then the job keeps its lock (BullMQ renews it).
        await retrying(() => job.moveToDelayed(Date.now() + delayMs, token), retry);
      } catch (moveErr) {
        // The lock lapsed (another worker took the job as stalled), or Redis stayed away.
        log.warn({ jobId: job.id, err: moveErr }, 'could not send the job back to its queue');
        throw err;
      }
      // Counted once the job is ours in the delayed set (a write before the move could land on a
      // job another worker took as stalled). Not counted if Redis went away again: the count is a
      // backstop, not the job's state. The write replaces the job's data: one that landed later
      // than the delay (Redis away again for that long) could undo a mark the job's next run made.
      await job
        .updateData({ ...(job.data as object), [DEFERRALS_FIELD]: deferrals })
        .catch((dataErr: unknown) =>
          log.warn({ jobId: job.id, err: dataErr }, 'could not count a job sent back while Redis was away'),
        );
      metrics.jobsDeferred.inc({ queue });
      throw new DelayedError();
    }
  };
}
