/** The four loops' queues on one connection, named from the catalog. */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logging/logger.js';
import { QUEUE_NAMES } from './catalog.js';

export interface LoopQueues {
  readonly sense: Queue;
  readonly plan: Queue;
  /** Node jobs of every kind: the `tool` pool's queue. */
  readonly node: Queue;
  readonly reflect: Queue;
}

/**
 * Opens the four queues. Each gets an `error` listener that logs through `log`: a BullMQ object
 * without one prints its connection errors' stacks to the console.
 */
export function openQueues(connection: Redis, prefix: string, log: Pick<Logger, 'warn'>): LoopQueues {
  const open = (name: string): Queue => {
    const queue = new Queue(name, { connection, prefix });
    queue.on('error', (err) => log.warn({ err: err.message, queue: name }, 'queue error'));
    return queue;
  };
  return {
    sense: open(QUEUE_NAMES.sense),
    plan: open(QUEUE_NAMES.plan),
    node: open(QUEUE_NAMES.tool),
    reflect: open(QUEUE_NAMES.reflect),
  };
}

export async function closeQueues(queues: LoopQueues): Promise<void> {
  await Promise.all(Object.values(queues).map((q: Queue) => q.close()));
}
