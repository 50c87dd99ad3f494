/**
 * Aborts a run's in-flight nodes in this process when the run is cancelled or fails elsewhere.
 * One subscriber connection per process listens on the abort channel.
 */
import { setMaxListeners } from 'node:events';
import { closeRedis, type RedisClient } from '../state/redis-client.js';

/** The signal a run's tracked work in this process shares, and how many hold it. */
interface RunSignal {
  readonly controller: AbortController;
  holders: number;
}

export class RunAborts {
  private readonly active = new Map<string, RunSignal>();

  private constructor(private readonly subscriber: RedisClient) {}

  static async listen(subscriber: RedisClient, channel: string): Promise<RunAborts> {
    const aborts = new RunAborts(subscriber);
    subscriber.on('message', (ch: string, runId: string) => {
      if (ch === channel) aborts.abortRun(runId);
    });
    await subscriber.subscribe(channel);
    return aborts;
  }

  /**
   * A signal aborted when `runId` is aborted; call `release` when the node is done. A run's nodes
   * in this process share one signal (an abort ends them all), so a chain of handed-off nodes, each
   * tracked before the last one is released, makes one controller, not one per node.
   */
  track(runId: string): { signal: AbortSignal; release: () => void } {
    let shared = this.active.get(runId);
    if (!shared) {
      shared = { controller: new AbortController(), holders: 0 };
      // Every node of a wide fan-out in this process listens on it (one listener per tool call).
      setMaxListeners(0, shared.controller.signal);
      this.active.set(runId, shared);
    }
    const held = shared;
    held.holders += 1;
    let released = false;
    return {
      signal: held.controller.signal,
      release: () => {
        if (released) return;
        released = true;
        held.holders -= 1;
        if (held.holders === 0 && this.active.get(runId) === held) this.active.delete(runId);
      },
    };
  }

  /**
   * Aborts what tracks the run now. What tracks it afterwards gets a new signal: a run resumed after
   * it failed runs its next nodes unaborted.
   */
  abortRun(runId: string): void {
    const shared = this.active.get(runId);
    if (!shared) return;
    this.active.delete(runId);
    shared.controller.abort(new Error(`run ${runId} aborted`));
  }

  async close(): Promise<void> {
    await closeRedis(this.subscriber);
  }
}
