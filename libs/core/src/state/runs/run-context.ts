/**
 * What every part of a run's state shares: the Redis client, the run scripts, a run's keys, and
 * the encodings the scripts and the parts agree on. Internal to `state/runs/`: `run-store.ts`
 * builds one context and hands it to each part.
 */
import type { RedisClient } from '../redis-client.js';
import type { NodeSnapshot, UsageCharge } from '../../domain/run-model.js';
import { channels, runKeyList, runKeys, type Channels, type RunKeys } from '../keys.js';
import { loadScripts, type ScriptRunner } from '../scripts.js';
import { DEFAULT_MAX_WAIT_DAYS, maxRunSeconds } from '../../domain/wait-limits.js';

export interface RunStoreOptions {
  readonly prefix: string;
  /** How long a settled run's record is kept. @defaultValue 7 days */
  readonly retentionSeconds: number;
  /**
   * The longest a run may last (`TETRALOOP_MAX_WAIT_DAYS` in seconds): how long its tenant's indexes
   * keep it, as it may run that long and be kept the retention after. @defaultValue 30 days
   */
  readonly maxRunSeconds?: number;
  /**
   * Events kept in a run's stream (recorded in the run's hash at creation); past it the older ones
   * are trimmed, at every 64th event (`XTRIM MAXLEN ~`). @defaultValue 10000
   */
  readonly eventsMax?: number;
  /** The configuration's version tag, recorded on every run this store creates (`configVersion`). */
  readonly configVersion?: string;
}

export class RunContext {
  /** The scripts of `state/lua/` (`run.lib.lua` first), as commands on `redis`. */
  readonly script: ScriptRunner;
  readonly channels: Channels;

  constructor(
    readonly redis: RedisClient,
    readonly options: RunStoreOptions,
  ) {
    this.script = loadScripts(redis);
    this.channels = channels(options.prefix);
  }

  /** A run's keys by name. */
  keysOf(runId: string): RunKeys {
    return runKeys(this.options.prefix, runId);
  }

  /** A run's keys in the order every run script takes them. */
  scriptKeys(runId: string): string[] {
    return runKeyList(this.keysOf(runId));
  }

  /** Until a run settles its keys carry this TTL, so an abandoned run cannot stay forever. */
  safetyTtl(timeoutSeconds: number): number {
    return this.options.retentionSeconds + timeoutSeconds;
  }

  /**
   * The TTL of a session run's keys until it starts: it may wait in its lane while the run ahead of
   * it lasts, and that run may wait (a signal, an approval, a budget decision, a time) up to the
   * longest a run may last, not just this run's own deadline. Kept this long from its creation and
   * again whenever its lane starts the run ahead of it (`keepQueued`); its start then moves its
   * expiry to its own deadline plus the retention, and settling to the retention.
   */
  laneSafetyTtl(): number {
    return (
      this.options.retentionSeconds + (this.options.maxRunSeconds ?? maxRunSeconds(DEFAULT_MAX_WAIT_DAYS))
    );
  }
}

export const parseJson = (text: string | null | undefined): unknown =>
  text ? (JSON.parse(text) as unknown) : null;

/** The replies of a MULTI, in order; the first failed command's error is thrown. */
export function multiReplies(replies: [Error | null, unknown][] | null): unknown[] {
  return (replies ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

/** A usage charge as the scripts take it: whole numbers, absent counters as 0. */
export const chargeJson = (charge: UsageCharge): string =>
  JSON.stringify(
    Object.fromEntries(
      (Object.entries(charge) as [string, number | undefined][]).map(([k, v]) => [k, Math.round(v ?? 0)]),
    ),
  );

/**
 * A snapshot as stored: its status first, so a script reads it off the front of the text (the node
 * counts, `run.lib.lua`) without decoding outputs of any depth.
 */
export function snapshotJson(snapshot: NodeSnapshot): string {
  const { status, ...rest } = snapshot;
  return JSON.stringify({ status, ...rest });
}

/** Readiness counters as the scripts take them: the nodes still waiting on a dependency. */
export const pendingJson = (pending: ReadonlyMap<string, number>): string =>
  JSON.stringify(Object.fromEntries([...pending].filter(([, n]) => n > 0)));
