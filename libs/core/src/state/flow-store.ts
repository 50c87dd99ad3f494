/**
 * Flow control's counters and queues in Redis: each change is one script (`lua-flow/`, where the
 * keys are listed), so capacity is taken on every counter of a call at once or not at all, and the
 * order waiters are served in (priority, then round-robin across fair-share groups, then arrival)
 * is decided in one place. Also keeps the limits an admin set over the configured ones.
 */
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import { LimitsDocument, type FlowKey } from '../flow/limits.js';
import { flowKeys, flowLimitsKey, type FlowKeys } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';
import { slotPipeline } from './slot-multi.js';

export type FlowDecision =
  | {
      readonly ok: true;
      /** How long the call waited in all, from its first ask. */
      readonly waitedMs: number;
      /** Other calls granted capacity meanwhile: their jobs are woken. */
      readonly granted: readonly string[];
      /** A call that went at once: its reservations, handed in again at its release. */
      readonly held?: HeldCall;
    }
  | {
      readonly ok: false;
      /** When the call may go, if that can be told (a rate or a pause); null: when a call ends. */
      readonly waitMs: number | null;
      /** The counter it waits on. */
      readonly key: string;
      readonly granted: readonly string[];
    };

/** What a call that went at once holds: RedisClient keeps no record of it, its release hands this in. */
export interface HeldCall {
  readonly keys: readonly string[];
  /** JSON: counter → reservation id. */
  readonly reservations: string;
}

/** How adaptive counters react to a `429`: see docs/flow-control.md. */
export interface AdaptiveSettings {
  /** Multiplicative decrease. @defaultValue 0.5 */
  readonly decrease: number;
  /** The lowest fraction of a limit a counter is cut to. @defaultValue 0.1 */
  readonly floor: number;
  /** Additive increase per successful call. @defaultValue 0.05 */
  readonly increase: number;
  /** At most one cut per this many ms. @defaultValue 1000 */
  readonly cooldownMs: number;
}

export const DEFAULT_ADAPTIVE: AdaptiveSettings = {
  decrease: 0.5,
  floor: 0.1,
  increase: 0.05,
  cooldownMs: 1000,
};

/** One counter as `GET /v1/limits` shows it. */
export const CounterState = z.object({
  key: z.string(),
  inFlight: z.number().int().nonnegative(),
  /** Calls reserved inside the rate's interval, and their tokens. */
  requests: z.number().int().nonnegative(),
  tokens: z.number().int().nonnegative(),
  /** Adaptive scale of the limit (1: as declared). */
  factor: z.number().nonnegative(),
  pausedUntil: z.string().nullable(),
  lastUsed: z.string(),
});
export type CounterState = z.infer<typeof CounterState>;

/** The limits set through the API, with when and by whom. */
export interface StoredLimits {
  readonly document: LimitsDocument;
  readonly updatedAt: string;
  readonly version: number;
}

export class FlowStore {
  private readonly script: ScriptRunner;
  private readonly keys: FlowKeys;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly adaptive: AdaptiveSettings = DEFAULT_ADAPTIVE,
  ) {
    this.script = loadScripts(redis);
    this.keys = flowKeys(prefix);
  }

  /**
   * Asks capacity for the call of `member` (its node job's id) on `keys`. Asking again for the same
   * call is safe: a waiting call keeps its place, a granted one goes.
   */
  async acquire(
    member: string,
    keys: readonly FlowKey[],
    call: { priority: number; tokens: number; leaseMs: number },
  ): Promise<FlowDecision> {
    const defs = keys.map((k) => ({
      id: k.id,
      c: k.concurrency,
      r: k.requests,
      t: k.tokens,
      i: k.intervalMs,
      a: String(k.adaptive),
      g: k.group,
    }));
    const k = this.keys;
    const reply = (await this.script(
      'flow-acquire-5',
      [k.base, k.waiting, k.granted, k.member(member), k.counters],
      [member, call.priority, Math.max(0, Math.ceil(call.tokens)), call.leaseMs, JSON.stringify(defs)],
    )) as [number, number, string, string, ...string[]];
    const [ok, ms, key, reservations, ...granted] = reply;
    if (ok !== 1) return { ok: false, waitMs: ms < 0 ? null : ms, key, granted };
    return {
      ok: true,
      waitedMs: ms,
      granted,
      ...(reservations !== '' ? { held: { keys: keys.map((k) => k.id), reservations } } : {}),
    };
  }

  /**
   * The call of `member` ended (or will not be made): its slots are freed, its token reservation
   * settles to `usedTokens` (kept as reserved when undefined), and the next waiters are granted.
   */
  async release(
    member: string,
    outcome: { usedTokens?: number; succeeded: boolean; leaseMs: number; held?: HeldCall },
  ): Promise<string[]> {
    const k = this.keys;
    return (await this.script(
      'flow-release-4',
      [k.base, k.waiting, k.granted, k.member(member)],
      [
        member,
        outcome.usedTokens === undefined ? -1 : Math.max(0, Math.ceil(outcome.usedTokens)),
        outcome.succeeded ? '1' : '0',
        outcome.leaseMs,
        this.adaptive.increase,
        outcome.held ? JSON.stringify(outcome.held.keys) : '',
        outcome.held?.reservations ?? '',
      ],
    )) as string[];
  }

  /** The periodic step: waiters granted, grants not taken up woken again or revoked. */
  async tick(options: { leaseMs: number; rewakeMs: number; perKey: number }): Promise<string[]> {
    const k = this.keys;
    return (await this.script(
      'flow-tick-3',
      [k.base, k.waiting, k.granted],
      [options.leaseMs, options.rewakeMs, options.perKey],
    )) as string[];
  }

  /**
   * A service answered `429` (`cut`: its adaptive counters are cut) or said a limit is used up;
   * given a delay, the counters are paused that long for every call.
   */
  async penalize(keyIds: readonly string[], retryAfterMs: number | undefined, cut = true): Promise<number[]> {
    if (keyIds.length === 0) return [];
    const factors = (await this.script(
      'flow-penalize-1',
      [this.keys.base],
      [
        JSON.stringify(keyIds),
        Math.max(0, Math.round(retryAfterMs ?? 0)),
        cut ? this.adaptive.decrease : 1,
        this.adaptive.floor,
        this.adaptive.cooldownMs,
      ],
    )) as string[];
    return factors.map(Number);
  }

  /** Counters used in the last day, most recent first (at most `limit`). */
  async counters(limit = 200): Promise<CounterState[]> {
    const index = this.keys.counters;
    await this.redis.zremrangebyscore(index, '-inf', Date.now() - 86_400_000);
    const entries = await this.redis.zrevrange(index, 0, limit - 1, 'WITHSCORES');
    const ids: { key: string; at: number }[] = [];
    for (let i = 0; i + 1 < entries.length; i += 2)
      ids.push({ key: entries[i]!, at: Number(entries[i + 1]) });
    const pipeline = slotPipeline(this.redis);
    for (const { key } of ids) {
      const k = this.keys.counter(key);
      pipeline.zcount(k.inflight, Date.now(), '+inf');
      pipeline.zcard(k.log);
      pipeline.hmget(k.state, 'logTokens', 'factor', 'pausedUntil');
    }
    const replies = (await pipeline.exec()) ?? [];
    return ids.map(({ key, at }, i) => {
      const [inFlight, requests, fields] = [0, 1, 2].map((j) => replies[i * 3 + j]?.[1]) as [
        number,
        number,
        (string | null)[],
      ];
      const paused = Number(fields[2] ?? 0);
      return {
        key,
        inFlight,
        requests,
        tokens: Number(fields[0] ?? 0),
        factor: Number(fields[1] ?? 1),
        pausedUntil: paused > Date.now() ? new Date(paused).toISOString() : null,
        lastUsed: new Date(at).toISOString(),
      };
    });
  }

  /** The limits set through the API, or null when the configured ones apply. */
  async storedLimits(): Promise<StoredLimits | null> {
    const raw = await this.redis.get(flowLimitsKey(this.prefix));
    if (raw === null) return null;
    const parsed = JSON.parse(raw) as { document: unknown; updatedAt: string; version: number };
    const document = LimitsDocument.safeParse(parsed.document);
    // A stored document this version cannot read is ignored rather than failing every call.
    return document.success ? { ...parsed, document: document.data } : null;
  }

  async putLimits(document: LimitsDocument): Promise<StoredLimits> {
    const key = flowLimitsKey(this.prefix);
    const previous = await this.storedLimits();
    const stored: StoredLimits = {
      document,
      updatedAt: new Date().toISOString(),
      version: (previous?.version ?? 0) + 1,
    };
    await this.redis.set(key, JSON.stringify(stored));
    return stored;
  }

  /** Back to the configured limits. */
  async clearLimits(): Promise<boolean> {
    return (await this.redis.del(flowLimitsKey(this.prefix))) === 1;
  }
}
