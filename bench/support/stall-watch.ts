/**
 * Follows BullMQ's event streams of some queues and keeps their `stalled` and `failed` events with
 * when they were read: which jobs BullMQ took back from a worker (its lock had expired), and when.
 * Survives Redis restarts (it reads again from where it was).
 */
import { Redis } from 'ioredis';

export interface JobEventSeen {
  readonly queue: string;
  readonly event: 'stalled' | 'failed';
  readonly jobId: string;
  /** When it was read (epoch ms); within the read's block time of when it happened. */
  readonly at: number;
  readonly reason?: string;
}

export interface StallWatch {
  readonly events: readonly JobEventSeen[];
  stop(): Promise<void>;
}

export function watchStalls(url: string, prefix: string, queues: readonly string[]): StallWatch {
  const redis = new Redis(url, { maxRetriesPerRequest: null, retryStrategy: () => 200 });
  redis.on('error', () => undefined);
  const keys = queues.map((q) => `${prefix}:${q}:events`);
  const cursors = keys.map(() => '$');
  const events: JobEventSeen[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const result = await redis.xread('COUNT', 1000, 'BLOCK', 200, 'STREAMS', ...keys, ...cursors);
        const at = Date.now();
        for (const [key, entries] of result ?? []) {
          const index = keys.indexOf(key);
          for (const [id, list] of entries) {
            cursors[index] = id;
            const fields: Record<string, string> = {};
            for (let i = 0; i + 1 < list.length; i += 2) fields[list[i]!] = list[i + 1]!;
            if (fields.event === 'stalled' || fields.event === 'failed') {
              events.push({
                queue: queues[index]!,
                event: fields.event,
                jobId: fields.jobId ?? '',
                at,
                ...(fields.failedReason ? { reason: fields.failedReason.slice(0, 120) } : {}),
              });
            }
          }
        }
      } catch {
        // Redis is away (killed and restarting): try again.
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  })();
  return {
    events,
    async stop() {
      stopped = true;
      await loop;
      redis.disconnect();
    },
  };
}
