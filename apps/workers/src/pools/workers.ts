/**
 * The BullMQ Workers of a pool, alike for every pool: how many share a queue's slots, the retry
 * delays the executors computed, the events they log, and how they stop within the shutdown grace.
 * What a pool does with its jobs is its own module's (`plan.ts`, `node.ts`, `sense.ts`,
 * `reflect.ts`: a {@link PoolDefinition} each).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { Worker, type Job, type Processor, type Queue } from 'bullmq';
import { RetryNodeError } from '@tetraloop/core/executor';
import {
  BACKOFF_TYPE,
  RetryDeliveryError,
  type RunShard,
  WEBHOOK_BACKOFF_TYPE,
  type Pool,
} from '@tetraloop/core/queues';
import { isCluster } from '@tetraloop/core/runtime';
import { metrics } from '@tetraloop/core/telemetry';
import { workerOptionsOf, type WorkerEnv } from '../env.js';
import type { PoolContext } from './context.js';
import { deferWhileRedisAway } from './redis-away.js';

/** One pool of a process, as its module defines it. */
export interface PoolDefinition {
  /** The queues its Workers consume, with the shard each belongs to. */
  readonly queues: readonly { readonly queue: Queue; readonly shard: number }[];
  /** A processor for one Worker (each Worker of the pool gets its own). */
  readonly processor: () => Processor;
  /** Its periodic jobs, as BullMQ job schedulers: one schedule however many processes run the pool. */
  readonly schedule?: () => Promise<void>;
  /** A job of the pool failed (for good, or before a retry). */
  readonly onFailed?: (job: Job) => void;
  /**
   * Work each process of the pool does on a timer of its own (not a job: cheaper than a schedule's
   * job when it runs several times a second), one run at a time, stopped on shutdown.
   */
  readonly timers?: readonly PoolTimer[];
}

export interface PoolTimer {
  readonly what: string;
  readonly everyMs: number;
  readonly run: () => Promise<unknown>;
}

/**
 * Runs each timer's work every `everyMs` after the last run ended (so runs never overlap), until
 * the answered function is called; it resolves once no run is in flight. A failed run is
 * reported; the next one comes as planned.
 */
export function startTimers(
  timers: readonly PoolTimer[],
  onError: (timer: PoolTimer, err: unknown) => void,
): () => Promise<void> {
  let stopped = false;
  const handles = new Set<NodeJS.Timeout>();
  const running = new Set<Promise<void>>();
  for (const timer of timers) {
    const next = (): void => {
      if (stopped) return;
      const handle = setTimeout(() => {
        handles.delete(handle);
        const run = timer
          .run()
          .then(
            () => undefined,
            (err: unknown) => onError(timer, err),
          )
          .finally(() => {
            running.delete(run);
            next();
          });
        running.add(run);
      }, timer.everyMs);
      handle.unref();
      handles.add(handle);
    };
    next();
  }
  return async () => {
    stopped = true;
    for (const handle of handles) clearTimeout(handle);
    await Promise.all(running);
  };
}

/** How schedules keep their jobs: completed ones go, the last failed ones stay to be looked at. */
export const KEEP_SCHEDULES = { removeOnComplete: true, removeOnFail: { count: 100 } };

/**
 * The shards of the run queues this process's plan and tool pools consume: every shard, or those
 * of TETRALOOP_WORKER_SHARDS.
 */
export function assignedShards(ctx: PoolContext): (RunShard & { shard: number })[] {
  const assigned = ctx.env.TETRALOOP_WORKER_SHARDS;
  return ctx.queues.shards
    .map((s, shard) => ({ ...s, shard }))
    .filter(({ shard }) => assigned.length === 0 || assigned.includes(shard));
}

/** Slots per BullMQ Worker of the tool pool beyond which the pool's queue gets another Worker. */
const SLOTS_PER_FETCHER = 8;
/** At most this many Workers per tool queue in one process. */
const MAX_FETCHERS = 4;

/**
 * How many BullMQ Workers share one queue's slots in this process. A Worker fetches its jobs one
 * `moveToActive` round trip at a time, so the 32 nodes a fan-out releases at once would start one
 * round trip apart; each fetch leaves BullMQ's marker for the next, so several Workers on the
 * queue fetch side by side. Only the tool pool has such bursts; each Worker adds one blocking
 * connection and its own stalled-job check.
 */
const fetchersOf = (pool: Pool, slots: number): number =>
  pool === 'tool' ? Math.min(MAX_FETCHERS, Math.max(1, Math.ceil(slots / SLOTS_PER_FETCHER))) : 1;

const CONCURRENCY_KEY = {
  sense: 'TETRALOOP_SENSE_CONCURRENCY',
  plan: 'TETRALOOP_PLAN_CONCURRENCY',
  tool: 'TETRALOOP_TOOL_CONCURRENCY',
  reflect: 'TETRALOOP_REFLECT_CONCURRENCY',
} as const satisfies Record<Pool, keyof WorkerEnv>;

/**
 * Starts a pool's Workers: on each of its queues (the plan and tool pools have one per shard of the
 * run queues), sharing the pool's concurrency among them (at least 1 each).
 */
export function startWorkers(ctx: PoolContext, pool: Pool, definition: PoolDefinition): Worker[] {
  const { env } = ctx;
  const targets = definition.queues;
  const perQueue = Math.max(
    1,
    Math.ceil((ctx.options.concurrency ?? env[CONCURRENCY_KEY[pool]]) / targets.length),
  );
  const fetchers = fetchersOf(pool, perQueue);
  const concurrency = Math.ceil(perQueue / fetchers);
  const poolLog = ctx.loggerFor(pool);
  const clustered = isCluster(ctx.connection);
  return targets.flatMap(({ queue, shard }) =>
    Array.from({ length: fetchers }, () => {
      const processor = deferWhileRedisAway(definition.processor(), {
        clustered,
        maxDeferrals: env.TETRALOOP_REDIS_AWAY_MAX_DEFERRALS,
        log: poolLog,
        queue: queue.name,
        shutdown: ctx.shutdown,
      });
      const worker = new Worker(queue.name, processor, {
        connection: ctx.connection,
        prefix: queue.opts.prefix!,
        concurrency,
        ...workerOptionsOf(env),
        // The node executor (and a webhook delivery) computes each retry's delay (class, jitter,
        // Retry-After) and hands it over here.
        settings: {
          backoffStrategy: (_attempts, type, err) =>
            type === BACKOFF_TYPE && err instanceof RetryNodeError
              ? err.delayMs
              : type === WEBHOOK_BACKOFF_TYPE && err instanceof RetryDeliveryError
                ? err.delayMs
                : 1000,
        },
      });
      worker.on('error', (err) => poolLog.error({ err, shard }, 'worker error'));
      // A job whose worker died (or missed its lock) goes back to run again elsewhere.
      worker.on('stalled', (jobId) => {
        metrics.jobsStalled.inc({ queue: queue.name });
        poolLog.warn({ jobId, shard }, 'job stalled: moved back to run again');
      });
      worker.on('failed', (job, err) => {
        if (!(err instanceof RetryNodeError) && !(err instanceof RetryDeliveryError))
          poolLog.warn({ jobId: job?.id, err, shard }, 'job failed');
        if (job) definition.onFailed?.(job);
      });
      return worker;
    }),
  );
}

/**
 * The order pools stop taking work on shutdown: the innermost loop first (tool), then the loops
 * around it (plan, sense), the slowest (reflect) last.
 */
export const SHUTDOWN_ORDER: readonly Pool[] = ['tool', 'plan', 'sense', 'reflect'];

/**
 * Closes workers: they stop fetching and their active jobs get `graceMs` to finish, then they are
 * closed anyway (those jobs are recovered as after a crash). True when they finished in time.
 */
export async function closeWithin(stage: readonly Worker[], graceMs: number): Promise<boolean> {
  const graceful = Promise.all(stage.map((w) => w.close()));
  // The grace timer is cancelled once the workers are closed, so it keeps no process alive.
  const grace = new AbortController();
  const inTime = await Promise.race([
    graceful.then(() => true),
    delay(graceMs, false, { signal: grace.signal }).catch(() => false),
  ]);
  grace.abort();
  if (!inTime) {
    // A forced close still waits for its lock renewals and connections; on a Redis node that died
    // those may never answer, and the connections are cut after this anyway.
    const forced = new AbortController();
    await Promise.race([
      Promise.all(stage.map((w) => w.close(true))),
      delay(FORCED_CLOSE_MS, undefined, { signal: forced.signal }).catch(() => undefined),
    ]);
    forced.abort();
  }
  return inTime;
}

/** How long a forced close of workers may take before the process goes on shutting down. */
const FORCED_CLOSE_MS = 5000;
