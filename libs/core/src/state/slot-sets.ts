/**
 * Slot sets in Redis: which members hold one of `cap` slots (a sorted set of members by the time
 * they got theirs) and which wait for one (another, oldest first). A tenant's running runs and a
 * run's running node jobs are both counted this way; each change is one script (`lua-limits/`).
 */
import type { RedisClient } from './redis-client.js';
import { runNodeSlotKeys, type SlotSetKeys } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

/**
 * What asking for a slot answers: the member holds one, or it waits on the list, where it has been
 * for `waitedMs` (since the first time it asked at the cap since it last held a slot, by Redis's
 * clock: one clock, whichever processes asked).
 */
export type SlotTake = { readonly held: true } | { readonly held: false; readonly waitedMs: number };

/** A sorted set's `WITHSCORES` reply (member, score, member, score, …) as pairs. */
function withScores(flat: readonly string[]): [member: string, score: string][] {
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([flat[i]!, flat[i + 1]!]);
  return pairs;
}

export class SlotSets {
  private readonly script: ScriptRunner;

  constructor(readonly redis: RedisClient) {
    this.script = loadScripts(redis);
  }

  /**
   * Holds a slot for `member` (now, or already: safe to repeat), or puts it on the waiting list,
   * keeping the time it first waited there. Both keys get `ttlSeconds`.
   */
  async acquire(keys: SlotSetKeys, member: string, cap: number, ttlSeconds: number): Promise<SlotTake> {
    const [held, waitedMs] = (await this.script(
      'acquire-slot-2',
      [keys.running, keys.waiting],
      [member, cap, ttlSeconds],
    )) as [number, number?];
    return held === 1 ? { held: true } : { held: false, waitedMs: waitedMs ?? 0 };
  }

  /**
   * Gives back `member`'s slot (null: only looks) and answers the free slots and the waiting
   * members to wake, oldest first, with `extra` more in case some are gone.
   */
  async release(
    keys: SlotSetKeys,
    member: string | null,
    cap: number,
    extra = 5,
  ): Promise<{ free: number; waiting: string[] }> {
    const [free, waiting] = (await this.script(
      'release-slot-2',
      [keys.running, keys.waiting],
      [member ?? '', cap, extra],
    )) as [number, string[]];
    return { free, waiting };
  }

  /** The holders, oldest first, each with the score it got its slot at. */
  async holders(keys: SlotSetKeys): Promise<[member: string, score: string][]> {
    return withScores(await this.redis.zrange(keys.running, '0', '-1', 'WITHSCORES'));
  }

  /**
   * The holders that have held their slot for at least `ms` (by Redis's clock, which scores them),
   * oldest first, each with its score.
   */
  async heldFor(keys: SlotSetKeys, ms: number): Promise<[member: string, score: string][]> {
    return withScores((await this.script('held-slots-2', [keys.running, keys.waiting], [ms])) as string[]);
  }

  /**
   * Frees the slots of holders that are done without having given them back, each read with its
   * score (one that took a slot again since keeps it). Answers how many were freed.
   */
  async forget(keys: SlotSetKeys, done: readonly [string, string][]): Promise<number> {
    if (done.length === 0) return 0;
    return (await this.script('forget-slots-2', [keys.running, keys.waiting], done.flat())) as number;
  }

  /** Takes members off the waiting list (they are gone). */
  async leaveWaiting(keys: SlotSetKeys, members: readonly string[]): Promise<void> {
    if (members.length > 0) await this.redis.zrem(keys.waiting, ...members);
  }
}

/** The node slots of runs with a `maxParallelNodes` cap (`executor/node-slots.ts`), by run id. */
export class RunNodeSlots {
  readonly sets: SlotSets;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.sets = new SlotSets(redis);
  }

  keysOf(runId: string): SlotSetKeys {
    return runNodeSlotKeys(this.prefix, runId);
  }
}
