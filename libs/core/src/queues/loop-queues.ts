/** The four loops' queues on one connection, named from the catalog, laid out by `queue-shards.ts`. */
import { Queue } from 'bullmq';
import type { Logger } from '../logging/logger.js';
import { isCluster, type RedisClient } from '../state/redis-client.js';
import { DEFAULT_TOOL_QUEUE } from '../tools/custom-tool.js';
import { QUEUE_NAMES, toolQueueName } from './catalog.js';
import { queueLayout } from './queue-shards.js';

/** One shard of the run queues: a run's root job and its node jobs, one BullMQ flow, one slot. */
export interface RunShard {
  readonly plan: Queue;
  /** Node jobs of every kind: the `tool` pool's queue (the `default` tool queue). */
  readonly node: Queue;
  /**
   * The queue of this shard a tool queue's node jobs go to: `node` for `default`, else a queue of
   * its own (`tool.<name>`, under the shard's prefix, so a run's jobs stay one flow in one slot),
   * opened on first use.
   */
  toolQueue(name: string): Queue;
  /** The tool queues of this shard opened so far besides `node`, by tool queue name. */
  readonly toolQueues: ReadonlyMap<string, Queue>;
}

export interface LoopQueues {
  /** The one connection every queue sends on. */
  readonly connection: RedisClient;
  readonly sense: Queue;
  /** Shard 0's plan queue: where the plan pool's job schedulers live. */
  readonly plan: Queue;
  /** Shard 0's node queue. */
  readonly node: Queue;
  readonly reflect: Queue;
  /** Every shard of the run queues (one unless `TETRALOOP_QUEUE_SHARDS`), by index. */
  readonly shards: readonly RunShard[];
}

/** A queue as metrics and Bull Board show it: its name, and its shard when the run queues are sharded. */
export interface ShownQueue {
  readonly queue: Queue;
  readonly shard?: number;
}

/**
 * Every queue once: sense, each shard's plan and tool queues (custom tool queues: those named in
 * `toolQueues`, opened if they were not), reflect.
 */
export function shownQueues(queues: LoopQueues, toolQueues: readonly string[] = []): ShownQueue[] {
  const sharded = queues.shards.length > 1;
  return [
    { queue: queues.sense },
    ...queues.shards.flatMap((s, shard) =>
      [s.plan, s.node, ...toolQueues.filter((q) => q !== DEFAULT_TOOL_QUEUE).map((q) => s.toolQueue(q))].map(
        (queue) => (sharded ? { queue, shard } : { queue }),
      ),
    ),
    { queue: queues.reflect },
  ];
}

/**
 * Opens the loops' queues: `shards` shards of the run queues (@defaultValue 1). Each gets an
 * `error` listener that logs through `log`: a BullMQ object without one prints its connection
 * errors' stacks to the console.
 */
export function openQueues(
  connection: RedisClient,
  prefix: string,
  log: Pick<Logger, 'warn'>,
  shards = 1,
): LoopQueues {
  const layout = queueLayout(prefix, { clustered: isCluster(connection), shards });
  const open = (name: string, bullPrefix: string): Queue => {
    const queue = new Queue(name, { connection, prefix: bullPrefix });
    queue.on('error', (err) => log.warn({ err: err.message, queue: name }, 'queue error'));
    return queue;
  };
  const runShards = layout.shards.map((bullPrefix): RunShard => {
    const node = open(QUEUE_NAMES.tool, bullPrefix);
    const toolQueues = new Map<string, Queue>();
    return {
      plan: open(QUEUE_NAMES.plan, bullPrefix),
      node,
      toolQueues,
      toolQueue(name) {
        if (name === DEFAULT_TOOL_QUEUE) return node;
        let queue = toolQueues.get(name);
        if (!queue) {
          queue = open(toolQueueName(name), bullPrefix);
          toolQueues.set(name, queue);
        }
        return queue;
      },
    };
  });
  return {
    connection,
    sense: open(QUEUE_NAMES.sense, layout.sense),
    plan: runShards[0]!.plan,
    node: runShards[0]!.node,
    reflect: open(QUEUE_NAMES.reflect, layout.reflect),
    shards: runShards,
  };
}

export async function closeQueues(queues: LoopQueues): Promise<void> {
  const opened = queues.shards.flatMap((s) => [...s.toolQueues.values()]);
  await Promise.all([...shownQueues(queues).map(({ queue }) => queue), ...opened].map((q) => q.close()));
}
