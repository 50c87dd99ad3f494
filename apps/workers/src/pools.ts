/**
 * Starts the worker pools of one process: BullMQ Workers per pool, on that loop's queue.
 * A process may run one pool (`tetraloop worker --pool tool`) or all of them (`tetraloop dev`).
 * What the pools share is opened once (`pools/context.ts`); each pool is one module
 * (`pools/plan.ts`, `pools/node.ts` for the tool pool, `pools/sense.ts`, `pools/reflect.ts`),
 * and their Workers are made alike (`pools/workers.ts`).
 */
import type { Worker } from 'bullmq';
import type { FlowGate } from '@tetraloop/core/executor';
import { shownQueues, type Pool } from '@tetraloop/core/queues';
import { isCluster, isRedisUnavailable, type ProcessTools } from '@tetraloop/core/runtime';
import { QueueWatch } from '@tetraloop/core/telemetry';
import type { WorkerEnv } from './env.js';
import { openPoolContext, type PoolContext, type StartPoolsOptions } from './pools/context.js';
import { nodePool } from './pools/node.js';
import { planPool } from './pools/plan.js';
import { reflectPool } from './pools/reflect.js';
import { sensePool } from './pools/sense.js';
import {
  SHUTDOWN_ORDER,
  closeWithin,
  startTimers,
  startWorkers,
  type PoolDefinition,
} from './pools/workers.js';

export type { StartPoolsOptions } from './pools/context.js';
export { SHUTDOWN_ORDER } from './pools/workers.js';

export interface PoolsHandle {
  readonly pools: readonly Pool[];
  /** Each pool's BullMQ workers: one per shard of the run queues for `plan` and `tool`, else one. */
  readonly workers: ReadonlyMap<Pool, readonly Worker[]>;
  /** Redis reachable and every worker running. */
  readonly ready: () => Promise<boolean>;
  /** Flow control of the tool pool's calls (the limits this process has in force). */
  readonly flow: FlowGate;
  /** The process's tools: the built-in ones, its MCP servers' and the custom tools it knows. */
  readonly mcp: ProcessTools;
  /**
   * Stops taking jobs, lets active ones finish for up to the shutdown grace
   * (TETRALOOP_SHUTDOWN_GRACE_MS), then closes anyway; closes connections. Custom tool calls in
   * flight are aborted first (their `ctx.signal`): each may stop cleanly within the grace, and its
   * node goes back to its queue for another worker, its attempt not failed.
   */
  readonly close: () => Promise<void>;
}

/** Each pool's module. */
const POOL_MODULES: Record<Pool, (ctx: PoolContext) => PoolDefinition> = {
  plan: planPool,
  tool: nodePool,
  sense: sensePool,
  reflect: reflectPool,
};

/** The order the pools' schedules are set. */
const SCHEDULE_ORDER: readonly Pool[] = ['sense', 'reflect', 'plan'];

export async function startPools(env: WorkerEnv, options: StartPoolsOptions): Promise<PoolsHandle> {
  const ctx = await openPoolContext(env, options);
  const definitions = new Map(options.pools.map((pool) => [pool, POOL_MODULES[pool](ctx)] as const));
  const workers = new Map<Pool, Worker[]>();
  for (const [pool, definition] of definitions) workers.set(pool, startWorkers(ctx, pool, definition));
  const allWorkers = [...workers.values()].flat();
  await Promise.all(allWorkers.map((w) => w.waitUntilReady()));
  for (const pool of SCHEDULE_ORDER) await definitions.get(pool)?.schedule?.();

  // Queue depths, the stall alarm and Redis's health come from where the work is too, so they stay
  // true (and autoscaling keeps seeing the backlog) while every API process is down.
  const watch = new QueueWatch(shownQueues(ctx.queues, ctx.servedQueues));
  // A custom tool's queue is watched once the catalog names it (KEDA scales its workers on it).
  ctx.mcp.catalog.onQueues((names) => watch.add(shownQueues(ctx.queues, names)));
  const stopWatch = await watch.start(env.TETRALOOP_QUEUE_CHECK_MS, (err) =>
    ctx.log.debug({ err: err.message }, 'queue check failed'),
  );
  // Redis away is logged once per outage elsewhere; a timer that runs several times a second
  // would repeat it at each run.
  const stopTimers = startTimers(
    [...definitions.values()].flatMap((d) => d.timers ?? []),
    (timer, err) =>
      isRedisUnavailable(err, { clustered: isCluster(ctx.connection) })
        ? ctx.log.debug({ err, timer: timer.what }, 'periodic work failed: Redis away')
        : ctx.log.warn({ err, timer: timer.what }, 'periodic work failed'),
  );

  return {
    pools: options.pools,
    workers,
    flow: ctx.flow,
    mcp: ctx.mcp,
    async ready() {
      if (ctx.closing() || ctx.connection.status !== 'ready' || ctx.state.status !== 'ready') return false;
      await Promise.all([ctx.connection.ping(), ctx.state.ping()]);
      return allWorkers.every((w) => w.isRunning());
    },
    async close() {
      // Before the workers close: a custom tool call hears of the shutdown at once.
      ctx.stop();
      await stopTimers();
      stopWatch();
      ctx.flow.stop();
      // From the innermost loop outward, each pool with its grace: no outer loop stops while an
      // inner one still works for it.
      for (const pool of SHUTDOWN_ORDER) {
        const stage = workers.get(pool) ?? [];
        if (stage.length === 0) continue;
        if (!(await closeWithin(stage, env.TETRALOOP_SHUTDOWN_GRACE_MS))) {
          ctx.log.warn(
            { pool, graceMs: env.TETRALOOP_SHUTDOWN_GRACE_MS },
            'shutdown grace passed; closing with jobs still active',
          );
        }
      }
      await ctx.close();
    },
  };
}
