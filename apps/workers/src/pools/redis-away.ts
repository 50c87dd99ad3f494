/**
 * A job that fails because Redis is away — an outage, a cluster failover, a server busy with a
 * long script — goes back to its queue without using up an attempt. BullMQ counts every error a
 * processor throws: a node job with one attempt that met a `CLUSTERDOWN` while it completed would
 * fail for good, and its run end `node_lost`, though nothing was wrong with the node. Instead the
 * job moves to the delayed set (its lock still held) and runs again shortly, as the same attempt:
 * what a stall redelivery does after a crash, without waiting for the lock to lapse. Every
 * processor already takes a redelivery (snapshots written stay, a completed node reports its
 * snapshot, a begun one starts again), so this adds no new way for a job to run twice.
 */
import { DelayedError, type Job, type Processor } from 'bullmq';
import type { Logger } from '@tetraloop/core/logging';
import { DEFAULT_BACKOFF, retryDelay, retrying } from '@tetraloop/core/policy';
import { isRedisUnavailable } from '@tetraloop/core/runtime';
import { metrics } from '@tetraloop/core/telemetry';

export interface RedisAwayOptions {
  /** The pool's connection is a Redis Cluster client (redirections it could not follow count). */
  readonly clustered: boolean;
  readonly log: Logger;
  /** The queue's name, for the metric. */
  readonly queue: string;
  /** The process shuts down: the move is not retried any more. */
  readonly shutdown?: AbortSignal;
  /**
   * How long the move to the delayed set is retried while Redis is still away. Past it the error
   * goes to BullMQ, which counts it (or, if it cannot reach Redis either, the lock lapses and the
   * job is redelivered as stalled).
   * @defaultValue 60 s
   */
  readonly moveForMs?: number;
}

const MOVE_FOR_MS = 60_000;

/** `processor`, with its Redis-away failures sent back to the queue uncounted. */
export function deferWhileRedisAway(processor: Processor, options: RedisAwayOptions): Processor {
  const { clustered, log, queue } = options;
  const away = (err: unknown): boolean => isRedisUnavailable(err, { clustered });
  return async (job: Job, token?: string, signal?: AbortSignal) => {
    try {
      return (await processor(job, token, signal)) as unknown;
    } catch (err) {
      if (token === undefined || !away(err)) throw err;
      log.warn({ jobId: job.id, err }, 'Redis away: the job goes back to its queue, its attempt not counted');
      // The first step of the retry backoff (1 s, ±20 %): the redeliveries of many jobs spread out.
      const delayMs = retryDelay(1, {}, DEFAULT_BACKOFF);
      try {
        // Sent once Redis answers again; until then the job keeps its lock (BullMQ renews it).
        await retrying(() => job.moveToDelayed(Date.now() + delayMs, token), {
          forMs: options.moveForMs ?? MOVE_FOR_MS,
          retryIf: away,
          ...(options.shutdown ? { signal: options.shutdown } : {}),
        });
      } catch (moveErr) {
        // The lock lapsed (another worker took the job as stalled), or Redis stayed away.
        log.warn({ jobId: job.id, err: moveErr }, 'could not send the job back to its queue');
        throw err;
      }
      metrics.jobsDeferred.inc({ queue });
      throw new DelayedError();
    }
  };
}
