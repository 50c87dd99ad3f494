/**
 * How durable a run must be before `POST /v1/runs` answers `202`: the rules, with no I/O. By
 * default the answer follows Redis' own acknowledgement (AOF `everysec` can lose about the last
 * second of it to a crash of the Redis host). Stricter, at the price of accept latency: wait until
 * `replicas` replicas acknowledged the writes (`WAIT`, any Redis), and/or until the primary fsynced
 * them to its AOF (`WAITAOF 1 0`, Redis 7.2 and later). See `accept-barrier.ts` for the adapter.
 */

export const ACCEPT_WAITAOF_MODES = ['off', 'local'] as const;
export type AcceptWaitAof = (typeof ACCEPT_WAITAOF_MODES)[number];

export interface AcceptDurability {
  /** Replicas that must acknowledge an accepted run's writes; 0: none are waited for. @defaultValue 0 */
  readonly replicas: number;
  /** `local`: the primary must have fsynced them to its AOF (WAITAOF). @defaultValue "off" */
  readonly waitAof: AcceptWaitAof;
  /** The longest each wait may take before the accept is answered as unconfirmed. @defaultValue 1000 */
  readonly waitMs: number;
}

export const DEFAULT_ACCEPT_DURABILITY: AcceptDurability = { replicas: 0, waitAof: 'off', waitMs: 1000 };

/** Whether the accept path waits for anything beyond Redis' answer. */
export const waitsForDurability = (d: AcceptDurability): boolean => d.replicas > 0 || d.waitAof !== 'off';

/** The first Redis version with WAITAOF. */
export const WAITAOF_SINCE = '7.2.0';

/** `major.minor.patch` of a Redis version string, or undefined when it is not one. */
export function parseRedisVersion(version: string): [number, number, number] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

function atLeast(version: string, minimum: string): boolean {
  const have = parseRedisVersion(version);
  const need = parseRedisVersion(minimum)!;
  if (!have) return false;
  for (let i = 0; i < 3; i++) if (have[i] !== need[i]) return have[i]! > need[i]!;
  return true;
}

/** What the API knows of its Redis at boot (INFO server, INFO persistence). */
export interface RedisServerFacts {
  readonly version: string;
  readonly aofEnabled: boolean;
}

/**
 * Why the API cannot offer `durability` on this Redis, or undefined when it can: WAITAOF needs
 * Redis 7.2 and the AOF on. WAIT exists on every Redis, and replicas come and go, so `replicas` is
 * never refused here: an accept that finds too few is answered `503 not_replicated`.
 */
export function durabilityRefusal(d: AcceptDurability, server: RedisServerFacts): string | undefined {
  if (d.waitAof === 'off') return undefined;
  if (!atLeast(server.version, WAITAOF_SINCE)) {
    return `TETRALOOP_ACCEPT_WAITAOF=${d.waitAof} needs Redis ${WAITAOF_SINCE} or later (WAITAOF); the Redis at REDIS_URL is ${server.version}. Upgrade it, or unset TETRALOOP_ACCEPT_WAITAOF (TETRALOOP_ACCEPT_WAIT_REPLICAS works on any version)`;
  }
  if (!server.aofEnabled) {
    return `TETRALOOP_ACCEPT_WAITAOF=${d.waitAof} needs the AOF on (appendonly yes); the Redis at REDIS_URL has it off`;
  }
  return undefined;
}

/** What the waits answered: replicas that acknowledged (WAIT), and whether the AOF fsync was seen. */
export interface AcceptAcks {
  /** Null when not waited for. */
  readonly replicas: number | null;
  /** Null when not waited for. */
  readonly aofLocal: boolean | null;
}

export type AcceptShortfall =
  | { readonly code: 'not_replicated'; readonly wanted: number; readonly acknowledged: number }
  | { readonly code: 'not_persisted' };

/** What the acks leave unconfirmed, or undefined when the accepted run is as durable as asked. */
export function shortfallOf(d: AcceptDurability, acks: AcceptAcks): AcceptShortfall | undefined {
  if (d.replicas > 0 && (acks.replicas ?? 0) < d.replicas) {
    return { code: 'not_replicated', wanted: d.replicas, acknowledged: acks.replicas ?? 0 };
  }
  if (d.waitAof === 'local' && acks.aofLocal !== true) return { code: 'not_persisted' };
  return undefined;
}
