/**
 * Queue depth gauges, the stall alarm and `tetraloop_redis_up`: every check reads each queue's job
 * counts; a queue whose pending count has not changed for 6 consecutive checks while work is
 * pending is stalled (a whole pool down, or stuck), and its gauge turns 1.
 *
 * Every API and worker process runs one, so the gauges describe shared Redis state from many
 * reporters at once: combine them with `max`, never `sum`. A reporter that cannot read Redis says
 * so (`tetraloop_redis_up 0`) and stops reporting depths and stalls it can no longer see, so its
 * last numbers never outvote the reporters that still can.
 */
import type { Queue } from 'bullmq';
import { metrics } from './metrics.js';

/**
 * A queue as its gauges label it: `queue` its name, and `shard` its shard of the run queues when
 * they are sharded (`TETRALOOP_QUEUE_SHARDS` > 1; absent otherwise, so one shard reads as before).
 */
export interface WatchedQueue {
  readonly queue: Queue;
  readonly shard?: number;
}

type Labels = { queue: string; shard?: string };
const labelsOf = ({ queue, shard }: WatchedQueue): Labels =>
  shard === undefined ? { queue: queue.name } : { queue: queue.name, shard: String(shard) };
/** A queue's name in the stall state and in what `check` answers: `tool`, or `tool@1` for shard 1. */
const idOf = (w: WatchedQueue): string =>
  w.shard === undefined ? w.queue.name : `${w.queue.name}@${w.shard}`;

export const STATES = ['waiting', 'prioritized', 'delayed', 'active', 'waiting-children', 'failed'] as const;
export const STALL_CHECKS = 6;
/** A read of the queues still unanswered after this long counts as Redis unreachable. */
export const CHECK_TIMEOUT_MS = 5000;

type Counts = Record<string, number>;

/** Pure: the next stall state of a queue from its previous state and its pending count now. */
export function nextStall(
  prev: { pending: number; unchanged: number } | undefined,
  pending: number,
): { pending: number; unchanged: number; stalled: boolean } {
  const unchanged = prev && prev.pending === pending && pending > 0 ? prev.unchanged + 1 : 0;
  return { pending, unchanged, stalled: unchanged >= STALL_CHECKS };
}

export interface QueueWatchOptions {
  /**
   * How long a read of the queues may take before Redis counts as unreachable. A worker's
   * connection queues commands while Redis is away instead of failing them, so without a bound a
   * check would wait for Redis to come back and the gauges would keep saying it is up.
   * @defaultValue 5000 ({@link CHECK_TIMEOUT_MS})
   */
  readonly timeoutMs?: number;
}

export class QueueWatch {
  private readonly state = new Map<string, ReturnType<typeof nextStall>>();
  private readonly timeoutMs: number;
  /** The read in flight: checks and scrapes share it, so a Redis that is away gets one at a time. */
  private reading: Promise<Map<string, Counts>> | undefined;
  /** The read the stall alarm last counted: a read shared by two checks is one observation. */
  private counted: Map<string, Counts> | undefined;

  private current: readonly WatchedQueue[] = [];
  private readonly labels = new Map<string, Labels>();

  constructor(queues: readonly (Queue | WatchedQueue)[], options: QueueWatchOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? CHECK_TIMEOUT_MS;
    this.add(queues);
  }

  /** The queues watched. */
  get watched(): readonly WatchedQueue[] {
    return this.current;
  }

  /** Watches these queues too (a custom tool queue that appeared in the catalog); known ones are kept. */
  add(queues: readonly (Queue | WatchedQueue)[]): void {
    const added = queues
      .map((q) => ('queue' in q && typeof q.queue === 'object' ? q : { queue: q as Queue }))
      .filter((w) => !this.labels.has(idOf(w)));
    if (added.length === 0) return;
    this.current = [...this.current, ...added];
    for (const w of added) {
      this.labels.set(idOf(w), labelsOf(w));
      // Nothing is stalled until a check says so: the gauge exists from the start.
      metrics.queueStalled.set(labelsOf(w), 0);
    }
  }

  /** The queues watched, each once. */
  get queues(): Queue[] {
    return this.watched.map((w) => w.queue);
  }

  /**
   * Checks now, then every `intervalMs` until the returned function is called. Resolves after the
   * first check, so a process that opens its metrics port afterwards never shows an unknown Redis
   * as down.
   */
  async start(intervalMs: number, onError: (err: Error) => void): Promise<() => void> {
    const tick = (): Promise<void> => this.check().then(() => undefined, onError);
    await tick();
    const timer = setInterval(() => void tick(), intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Reads the counts, updates the gauges and the stall alarm; returns the stalled queues. */
  async check(): Promise<string[]> {
    const counts = await this.observe();
    // A read shared with the previous check is one observation, not a second one without progress.
    if (counts !== this.counted) {
      this.counted = counts;
      for (const [queue, c] of counts) {
        // Pending work is what waits to be taken or is being worked on.
        const next = nextStall(
          this.state.get(queue),
          (c.waiting ?? 0) + (c.prioritized ?? 0) + (c.active ?? 0),
        );
        this.state.set(queue, next);
        metrics.queueStalled.set(this.labels.get(queue)!, next.stalled ? 1 : 0);
      }
    }
    return [...this.state].filter(([, s]) => s.stalled).map(([queue]) => queue);
  }

  /** Reads the counts into the depth gauges only (a scrape): the stall alarm keeps its own cadence. */
  async refresh(): Promise<void> {
    await this.observe().catch(() => undefined);
  }

  /** One read, bounded by the timeout, into the depth gauges and `tetraloop_redis_up`. */
  private async observe(): Promise<Map<string, Counts>> {
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`queue counts not read within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      timer.unref();
    });
    try {
      const counts = await Promise.race([this.reading, timedOut]);
      for (const [queue, c] of counts) {
        for (const s of STATES) metrics.queueJobs.set({ ...this.labels.get(queue)!, state: s }, c[s] ?? 0);
      }
      metrics.redisUp.set(1);
      return counts;
    } catch (err) {
      this.forget();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Redis could not be read: say so, and stop reporting what this process can no longer see. */
  private forget(): void {
    metrics.redisUp.set(0);
    this.state.clear();
    for (const labels of this.labels.values()) {
      for (const s of STATES) metrics.queueJobs.remove({ ...labels, state: s });
      metrics.queueStalled.remove(labels);
    }
  }

  private async read(): Promise<Map<string, Counts>> {
    const counts = new Map<string, Counts>();
    for (const w of this.watched) counts.set(idOf(w), await w.queue.getJobCounts(...STATES));
    return counts;
  }
}
