/** The four loops' queues on one connection, named from the catalog. */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { QUEUE_NAMES } from './catalog.js';

export interface LoopQueues {
  readonly sense: Queue;
  readonly plan: Queue;
  /** Node jobs of every kind: the `tool` pool's queue. */
  readonly node: Queue;
  readonly reflect: Queue;
}

export function openQueues(connection: Redis, prefix: string): LoopQueues {
  const open = (name: string): Queue => new Queue(name, { connection, prefix });
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
