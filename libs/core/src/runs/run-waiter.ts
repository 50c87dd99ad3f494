/**
 * Waits for runs to settle without polling: one subscriber connection per process listens on
 * the settled channel and wakes the waiters of that run.
 */
import { closeRedis, type RedisClient } from '../state/redis-client.js';

export class RunWaiter {
  private readonly waiters = new Map<string, Set<() => void>>();

  private constructor(private readonly subscriber: RedisClient) {}

  static async listen(subscriber: RedisClient, channel: string): Promise<RunWaiter> {
    const waiter = new RunWaiter(subscriber);
    subscriber.on('message', (ch: string, runId: string) => {
      if (ch !== channel) return;
      for (const wake of waiter.waiters.get(runId) ?? []) wake();
    });
    await subscriber.subscribe(channel);
    return waiter;
  }

  /**
   * Resolves true when `runId` settles, false after `timeoutMs`. `isSettled` is checked after
   * subscribing so a settle between the caller's read and this call is not missed.
   */
  async wait(
    runId: string,
    timeoutMs: number,
    isSettled: () => Promise<boolean>,
    signal?: AbortSignal,
  ): Promise<boolean> {
    let wake!: () => void;
    const woken = new Promise<boolean>((resolve) => (wake = () => resolve(true)));
    let set = this.waiters.get(runId);
    if (!set) {
      set = new Set();
      this.waiters.set(runId, set);
    }
    set.add(wake);
    let timer: NodeJS.Timeout | undefined;
    try {
      if (await isSettled()) return true;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
        signal?.addEventListener('abort', () => resolve(false), { once: true });
      });
      return await Promise.race([woken, timedOut]);
    } finally {
      clearTimeout(timer);
      set.delete(wake);
      if (set.size === 0) this.waiters.delete(runId);
    }
  }

  async close(): Promise<void> {
    await closeRedis(this.subscriber);
  }
}
