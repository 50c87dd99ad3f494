/**
 * Aborts a run's in-flight nodes in this process when the run is cancelled or fails elsewhere.
 * One subscriber connection per process listens on the abort channel.
 */
import { closeRedis, type RedisClient } from '../state/redis-client.js';

export class RunAborts {
  private readonly active = new Map<string, Set<AbortController>>();

  private constructor(private readonly subscriber: RedisClient) {}

  static async listen(subscriber: RedisClient, channel: string): Promise<RunAborts> {
    const aborts = new RunAborts(subscriber);
    subscriber.on('message', (ch: string, runId: string) => {
      if (ch === channel) aborts.abortRun(runId);
    });
    await subscriber.subscribe(channel);
    return aborts;
  }

  /** A signal aborted when `runId` is aborted; call `release` when the node is done. */
  track(runId: string): { signal: AbortSignal; release: () => void } {
    const controller = new AbortController();
    let set = this.active.get(runId);
    if (!set) {
      set = new Set();
      this.active.set(runId, set);
    }
    set.add(controller);
    return {
      signal: controller.signal,
      release: () => {
        set.delete(controller);
        if (set.size === 0) this.active.delete(runId);
      },
    };
  }

  abortRun(runId: string): void {
    for (const controller of this.active.get(runId) ?? [])
      controller.abort(new Error(`run ${runId} aborted`));
  }

  async close(): Promise<void> {
    await closeRedis(this.subscriber);
  }
}
