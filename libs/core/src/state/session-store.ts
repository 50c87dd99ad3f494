/**
 * A session's state in Redis: its lane (the run holding it, the runs and collected messages
 * waiting), its environment (versioned), its bootstrap snapshot and its transcript. Lane moves are
 * Lua scripts, so a lane is never half-moved. Every write gives all of the session's keys the idle
 * TTL in the same step, and the transcript keeps its newest lines up to a cap: under `noeviction`
 * a session's storage is bounded and an abandoned one goes away.
 */
import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import { unscopeName } from '../domain/tenant.js';
import type { IndexCursor } from '../insight/index-cursor.js';
import type { WorkspaceFile } from '../workspace/workspace.js';
import { busySessionsKey, sessionKeyList, sessionKeys, tenantSessionsKey } from './keys.js';
import { loadScripts, type ScriptName, type ScriptRunner } from './scripts.js';
import { entriesAfter } from './sorted-page.js';
import { slotMulti, slotPipeline } from './slot-multi.js';

export const LANE_MODES = ['followup', 'collect', 'steer', 'interrupt'] as const;
export type LaneMode = (typeof LANE_MODES)[number];
export const DROP_POLICIES = ['summarize', 'old', 'new'] as const;
export type DropPolicy = (typeof DROP_POLICIES)[number];

export interface LaneMessage {
  readonly text: string;
  readonly receivedAt: string;
  readonly eventId?: string;
  /** How many messages were folded into this one by the `summarize` drop policy. */
  readonly summarized?: number;
  /** The model the message asked for (a merged collect run takes the newest one's). */
  readonly model?: string;
  /** The reasoning effort the message asked for (see model/thinking.ts). */
  readonly thinking?: unknown;
  /** The secrets the message granted its run (a merged collect run gets every message's). */
  readonly secrets?: readonly string[];
  /**
   * Outside data handed to the message's run as such (a waking event's delimited block; a merged
   * collect run gets every message's). Kept in the collect buffer, never in the transcript.
   */
  readonly data?: readonly string[];
}

export type AdmitResult =
  | { kind: 'duplicate' }
  | { kind: 'start'; runId: string }
  | { kind: 'queued'; runId: string; position: number }
  /** followup: the lane holds `cap` waiting runs already; nothing changed. */
  | { kind: 'full'; cap: number }
  | { kind: 'collected'; position: number }
  | { kind: 'dropped' }
  | { kind: 'steered'; runId: string; version: number }
  | { kind: 'interrupt'; cancel: string; runId: string };

export type AdvanceResult =
  | { kind: 'noop' }
  | { kind: 'idle' }
  | { kind: 'run'; runId: string }
  | { kind: 'collect'; count: number }
  | { kind: 'collect-wait'; dueAt: number };

/** A message line of the transcript with its 0-based index in the transcript list. */
export interface HistoryMessage {
  readonly index: number;
  readonly role: string;
  readonly text: string;
}

/** What a compaction stands for: the summary of transcript lines fromIndex..toIndex (inclusive). */
export interface CompactionCovers {
  /** Where the summarised part starts: the context's first line (a rolling summary covers it all). */
  readonly fromIndex: number;
  /** The last line it stands for; the lines after it are read as they are. */
  readonly toIndex: number;
  /** How many messages it stands for. */
  readonly messages: number;
}

/** The current context's latest compaction, as kept in the session hash. */
export interface CompactionRecord {
  readonly summary: string;
  readonly covers: CompactionCovers;
}

/** The part of the current context a run may see, read in one step. */
export interface HistoryWindow {
  /** Index of the context's first transcript line (after the latest /new or /reset). */
  readonly contextFrom: number;
  /** First index read: after the latest compaction's toIndex, else contextFrom. */
  readonly start: number;
  /** The transcript's length when it was read. */
  readonly length: number;
  readonly compaction: CompactionRecord | null;
  /** The message lines from `start` on, oldest first. */
  readonly messages: HistoryMessage[];
}

export interface SessionStoreOptions {
  /** A session nobody writes to for this long expires, all its keys. @defaultValue 2592000 (30 days) */
  readonly idleTtlSeconds?: number;
  /** Transcript lines kept per session; older ones are dropped (their numbers stay). @defaultValue 10000 */
  readonly transcriptMaxLines?: number;
}

export const SESSION_STORE_DEFAULTS = { idleTtlSeconds: 30 * 86_400, transcriptMaxLines: 10_000 } as const;

/** One page of a transcript, by line number (numbers survive the cap). */
export interface TranscriptPage {
  /** The oldest line number still kept (lines before it were dropped by the cap). */
  readonly first: number;
  /** The transcript's length in line numbers: the number the next line will get. */
  readonly length: number;
  /** The number of `lines[0]`. */
  readonly from: number;
  readonly lines: unknown[];
}

/** A session's lane as `GET /v1/sessions/:sessionKey` shows it. */
export const SessionView = z.object({
  sessionKey: z.string(),
  /** When the session was first seen. */
  createdAt: z.string().nullable(),
  /** 1, incremented by each `/new` and `/reset`. */
  contextId: z.number().int().nonnegative(),
  /** The run holding the lane, `collect` while collected messages are being turned into one. */
  running: z.string().nullable(),
  /** The waiting items in order: runs, and the collected messages. */
  queued: z.union([
    z.array(z.object({ kind: z.literal('run'), runId: z.string() })),
    z.array(z.object({ kind: z.literal('collect'), messages: z.number().int().nonnegative() })),
  ]),
  /** The session's own mode (`/queue <mode>`); null when unset. */
  mode: z.enum(LANE_MODES).nullable(),
  /** The agent the session runs, bound by its first message; null before it. */
  agentId: z.string().nullable(),
  /** One more for every event written into the environment and every `steer` message. */
  environmentVersion: z.number().int().nonnegative(),
});
export type SessionView = z.infer<typeof SessionView>;

/** A session as `GET /v1/sessions` lists it: its lane, and when it was last written. */
export const SessionListing = SessionView.extend({ lastActiveAt: z.string() });
export type SessionListing = z.infer<typeof SessionListing>;

export interface SessionPage {
  readonly sessions: SessionListing[];
  /** Where the next page starts (the last session's activity time and key); null at the end. */
  readonly nextCursor: IndexCursor | null;
}

/**
 * How long an entry of a tenant's list of sessions whose session has no keys is kept: the entry is
 * written just before the session's first write, which may still be on its way.
 */
const LIST_GRACE_MS = 60_000;

/** Session scripts that write nothing: they keep no session alive, and list none. */
const READ_SCRIPTS: ReadonlySet<ScriptName> = new Set(['session-transcript-5']);

export class SessionStore {
  private readonly runner: ScriptRunner;
  private readonly idleTtlMs: number;
  private readonly transcriptMaxLines: number;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    options: SessionStoreOptions = {},
  ) {
    this.runner = loadScripts(redis);
    this.idleTtlMs = (options.idleTtlSeconds ?? SESSION_STORE_DEFAULTS.idleTtlSeconds) * 1000;
    this.transcriptMaxLines = options.transcriptMaxLines ?? SESSION_STORE_DEFAULTS.transcriptMaxLines;
  }

  private keys(sessionKey: string): string[] {
    return sessionKeyList(sessionKeys(this.prefix, sessionKey));
  }

  /**
   * Runs a session script with the idle TTL and the transcript cap appended (see session.lib.lua);
   * a script that writes also marks the session active in its tenant's list, in the same flush.
   */
  private async script(
    name: ScriptName,
    sessionKey: string,
    args: readonly (string | number)[],
  ): Promise<unknown> {
    const run = this.runner(name, this.keys(sessionKey), [...args, this.idleTtlMs, this.transcriptMaxLines]);
    if (READ_SCRIPTS.has(name)) return run;
    const [, result] = await Promise.all([this.noteActive(sessionKey), run]);
    return result;
  }

  /** Gives every key of the session the idle TTL, inside a MULTI of a write. */
  private touch(tx: ChainableCommander, sessionKey: string): ChainableCommander {
    for (const key of this.keys(sessionKey)) tx.pexpire(key, this.idleTtlMs);
    return tx;
  }

  /**
   * Marks a session written now in its tenant's list of sessions (by last write), trimmed of the
   * sessions whose idle TTL has passed. The list is one key per tenant while a session script
   * touches only its session's keys (one hash tag), so it is written by its own command beside the
   * write, sent first on the same connection; an entry whose session is gone (expired, or a write
   * that never came) is left out of a listing, and dropped by one once it is a minute old.
   */
  private async noteActive(sessionKey: string): Promise<void> {
    const key = tenantSessionsKey(this.prefix, unscopeName(sessionKey).tenant);
    const now = Date.now();
    await slotMulti(this.redis)
      .zadd(key, now, sessionKey)
      .zremrangebyscore(key, '-inf', now - this.idleTtlMs)
      .pexpire(key, this.idleTtlMs)
      .exec();
  }

  /**
   * One page of a tenant's sessions, most recently written first, each with its lane. `after`: the
   * previous page's `nextCursor`.
   */
  async list(tenant: string, limit: number, after: IndexCursor | null): Promise<SessionPage> {
    const key = tenantSessionsKey(this.prefix, tenant);
    const found: { entry: IndexCursor; view: SessionView }[] = [];
    const gone: string[] = [];
    let cursor = after;
    // One more than a page, past the entries whose session expired: whether a next page exists is
    // known without asking again.
    while (found.length <= limit) {
      const batch = await entriesAfter(
        this.redis,
        key,
        { min: -Infinity, max: Infinity },
        cursor,
        limit + 1 - found.length,
      );
      if (batch.length === 0) break;
      const views = await this.views(batch.map((e) => e.id));
      const settled = Date.now() - LIST_GRACE_MS;
      batch.forEach((entry, i) => {
        const view = views[i];
        if (view) found.push({ entry, view });
        else if (entry.score < settled) gone.push(entry.id);
      });
      cursor = batch.at(-1)!;
    }
    if (gone.length > 0) await this.redis.zrem(key, ...gone);
    const page = found.slice(0, limit);
    return {
      sessions: page.map(({ entry, view }) => ({
        ...view,
        lastActiveAt: new Date(entry.score).toISOString(),
      })),
      nextCursor: found.length > limit ? page.at(-1)!.entry : null,
    };
  }

  /** The lanes of several sessions in one round trip, in order; null for a session that is gone. */
  private async views(sessionKeysList: readonly string[]): Promise<(SessionView | null)[]> {
    if (sessionKeysList.length === 0) return [];
    const tx = slotMulti(this.redis);
    for (const sessionKey of sessionKeysList) {
      const k = sessionKeys(this.prefix, sessionKey);
      tx.hmget(k.meta, 'createdAt', 'contextId', 'running', 'mode', 'envVersion', 'agentId')
        .lrange(k.queue, 0, -1)
        .llen(k.buffer);
    }
    const replies = ((await tx.exec()) ?? []).map(([err, value]) => {
      if (err) throw err;
      return value;
    });
    return sessionKeysList.map((sessionKey, i) => {
      const [meta, queue, buffered] = replies.slice(3 * i, 3 * i + 3);
      const [createdAt, contextId, running, mode, envVersion, agentId] = meta as (string | null)[];
      if (!createdAt) return null;
      return viewOf(sessionKey, {
        createdAt,
        contextId: contextId ?? null,
        running: running ?? null,
        mode: mode ?? null,
        agentId: agentId ?? null,
        envVersion: envVersion ?? null,
        queue: queue as string[],
        buffered: Number(buffered),
      });
    });
  }

  /**
   * Admits a message to the lane (see lane-admit-6.lua). With `once`, a message whose id was
   * admitted within the window is answered `duplicate` and changes nothing; `line` is the
   * message's transcript line, appended in the same step.
   */
  async admit(
    sessionKey: string,
    args: {
      mode: LaneMode;
      runId: string;
      message: LaneMessage;
      collectCap: number;
      drop: DropPolicy;
      envCap: number;
      /** Most runs a `followup` message may find waiting in the lane. */
      followupCap: number;
      once?: { readonly id: string; readonly windowMs: number };
      /** A message without an `eventId`: its content id, a duplicate when admitted within `windowMs`. */
      sameContent?: { readonly id: string; readonly windowMs: number };
      line?: unknown;
    },
  ): Promise<AdmitResult> {
    const k = sessionKeys(this.prefix, sessionKey);
    const [, raw] = (await Promise.all([
      this.noteActive(sessionKey),
      this.runner(
        'lane-admit-6',
        [...sessionKeyList(k), k.seen],
        [
          Date.now(),
          args.mode,
          args.runId,
          JSON.stringify(args.message),
          args.collectCap,
          args.drop,
          args.envCap,
          args.once?.id ?? '',
          args.once?.windowMs ?? 0,
          args.line === undefined ? '' : JSON.stringify(args.line),
          args.followupCap,
          args.sameContent?.id ?? '',
          args.sameContent?.windowMs ?? 0,
          this.idleTtlMs,
          this.transcriptMaxLines,
        ],
      ),
    ])) as [void, (string | number)[]];
    const [kind, a, b] = raw;
    switch (kind) {
      case 'duplicate':
        return { kind };
      case 'start':
        await this.enterBusy(sessionKey);
        return { kind, runId: String(a) };
      case 'queued':
        return { kind, runId: String(a), position: Number(b) };
      case 'full':
        return { kind, cap: Number(a) };
      case 'collected':
        return { kind, position: Number(a) };
      case 'dropped':
        return { kind };
      case 'steered':
        return { kind, runId: String(a), version: Number(b) };
      default:
        return { kind: 'interrupt', cancel: String(a), runId: String(b) };
    }
  }

  async advance(sessionKey: string, finished: string, debounceMs: number): Promise<AdvanceResult> {
    const [kind, value] = (await this.script('lane-advance-5', sessionKey, [
      finished,
      Date.now(),
      debounceMs,
    ])) as [string, string | number | undefined];
    switch (kind) {
      case 'idle':
        await this.leaveBusy(sessionKey);
        return { kind };
      case 'run':
        return { kind, runId: String(value) };
      case 'collect':
        return { kind, count: Number(value) };
      case 'collect-wait':
        return { kind, dueAt: Number(value) };
      default:
        return { kind: 'noop' };
    }
  }

  /**
   * Takes an idle session out of the busy set. The set is one key for all sessions, while a lane
   * script touches only its session's keys (one hash tag, one Redis Cluster slot), so the removal
   * follows the script: a message admitted in between would leave a busy lane the sweep never
   * sees. Looking at the lane again after the removal closes that window: an admission that
   * happened before it is seen and the session put back.
   */
  private async leaveBusy(sessionKey: string): Promise<void> {
    await this.redis.srem(busySessionsKey(this.prefix), sessionKey);
    if ((await this.running(sessionKey)) !== null)
      await this.redis.sadd(busySessionsKey(this.prefix), sessionKey);
  }

  /** The first `count` collected messages, oldest first. */
  async collected(sessionKey: string, count: number): Promise<LaneMessage[]> {
    const raw = await this.redis.lrange(sessionKeys(this.prefix, sessionKey).buffer, 0, count - 1);
    return raw.map((m) => JSON.parse(m) as LaneMessage);
  }

  async commitCollect(sessionKey: string, runId: string, count: number): Promise<boolean> {
    return (await this.script('lane-commit-collect-5', sessionKey, [runId, count])) === 1;
  }

  /** Empties the lane; returns the run that held it and the queued runs, for cancelling. */
  async stop(sessionKey: string): Promise<{ running: string | null; queued: string[] }> {
    const [running, ...queued] = (await this.script('lane-stop-5', sessionKey, [])) as string[];
    await this.leaveBusy(sessionKey);
    return { running: running && running !== 'collect' ? running : null, queued };
  }

  async reset(sessionKey: string, line: unknown): Promise<number> {
    return (await this.script('session-reset-5', sessionKey, [
      new Date().toISOString(),
      JSON.stringify(line),
    ])) as number;
  }

  /**
   * Puts a session whose lane holds a run among the busy ones the lane sweep walks. After the lane
   * script, as the set is in another slot: a handling that dies in between leaves the lane out of
   * the sweep's sight, so whoever starts the lane's run again (a redelivered message answered
   * `duplicate`) calls this too.
   */
  async enterBusy(sessionKey: string): Promise<void> {
    await this.redis.sadd(busySessionsKey(this.prefix), sessionKey);
  }

  /** Takes a session out of the busy set without looking at its lane (one the sweep cannot read). */
  async forgetBusy(sessionKey: string): Promise<void> {
    await this.redis.srem(busySessionsKey(this.prefix), sessionKey);
  }

  async busySessions(): Promise<string[]> {
    return this.redis.smembers(busySessionsKey(this.prefix));
  }

  /**
   * Lanes running a run, and the items waiting in them (queued runs plus collected messages), over
   * at most `sample` busy lanes: what the API's lane gauges show at a scrape.
   */
  async laneLoad(sample = 1000): Promise<{ busy: number; waiting: number }> {
    const key = busySessionsKey(this.prefix);
    const [busy, lanes] = await Promise.all([this.redis.scard(key), this.redis.srandmember(key, sample)]);
    if (lanes.length === 0) return { busy, waiting: 0 };
    const pipeline = slotPipeline(this.redis);
    for (const lane of lanes) {
      const k = sessionKeys(this.prefix, lane);
      pipeline.llen(k.queue).llen(k.buffer);
    }
    const replies = (await pipeline.exec()) ?? [];
    const waiting = replies.reduce((n, [, count]) => n + (typeof count === 'number' ? count : 0), 0);
    return { busy, waiting };
  }

  async running(sessionKey: string): Promise<string | null> {
    const running = await this.redis.hget(sessionKeys(this.prefix, sessionKey).meta, 'running');
    return running ? running : null;
  }

  /**
   * Whether a `followup` message would find its lane full: a run holds the lane and `cap` runs
   * wait in it. A read only (one MULTI), so a message refused here leaves nothing behind; the
   * admission checks again in the same step as it queues.
   */
  async followupFull(sessionKey: string, cap: number): Promise<boolean> {
    const k = sessionKeys(this.prefix, sessionKey);
    const replies = await slotMulti(this.redis)
      .hget(k.meta, 'running')
      .llen(k.queue)
      .lpos(k.queue, 'collect')
      .exec();
    const [running, length, collect] = (replies ?? []).map(([err, value]) => {
      if (err) throw err;
      return value;
    });
    if (typeof running !== 'string' || running === '') return false;
    return Number(length) - (collect === null ? 0 : 1) >= cap;
  }

  /**
   * Appends transcript lines once per `id` within `windowMs` (see session-reply-6.lua): true when
   * they were appended, false when lines with this id were.
   */
  async appendOnce(
    sessionKey: string,
    id: string,
    windowMs: number,
    ...entries: unknown[]
  ): Promise<boolean> {
    const k = sessionKeys(this.prefix, sessionKey);
    const [, appended] = await Promise.all([
      this.noteActive(sessionKey),
      this.runner(
        'session-reply-6',
        [...sessionKeyList(k), k.seen],
        [
          Date.now(),
          id,
          windowMs,
          ...entries.map((e) => JSON.stringify(e)),
          this.idleTtlMs,
          this.transcriptMaxLines,
        ],
      ),
    ]);
    return appended === 1;
  }

  /**
   * Takes the lease on writing `runId`'s reply for `leaseMs`: true when this pass holds it. Two
   * passes may find a run settled at once (its root job and the lane sweep); the lease lets one
   * run the reply's hooks while the other stands aside. A holder that dies leaves it to expire.
   */
  async leaseReply(sessionKey: string, runId: string, leaseMs: number): Promise<boolean> {
    const key = sessionKeys(this.prefix, sessionKey).replying;
    return (await this.redis.set(key, runId, 'PX', leaseMs, 'NX')) === 'OK';
  }

  /** Gives back the reply lease `leaseReply` took, if this run still holds it. */
  async releaseReply(sessionKey: string, runId: string): Promise<void> {
    const key = sessionKeys(this.prefix, sessionKey).replying;
    if ((await this.redis.get(key)) === runId) await this.redis.del(key);
  }

  /** Whether `id` (a message admitted, a reply written) was noted within the last `windowMs` (see `admit`, `appendOnce`). */
  async seen(sessionKey: string, id: string, windowMs: number): Promise<boolean> {
    const at = await this.redis.zscore(sessionKeys(this.prefix, sessionKey).seen, id);
    return at !== null && Number(at) >= Date.now() - windowMs;
  }

  /** The runs waiting in the lane, in order (a `collect` placeholder is no run and is left out). */
  async queuedRuns(sessionKey: string): Promise<string[]> {
    const items = await this.redis.lrange(sessionKeys(this.prefix, sessionKey).queue, 0, -1);
    return items.filter((item) => item !== 'collect');
  }

  /** 1-based place of `runId` among the lane's waiting items, or null. */
  async position(sessionKey: string, runId: string): Promise<number | null> {
    const index = await this.redis.lpos(sessionKeys(this.prefix, sessionKey).queue, runId);
    return index === null ? null : index + 1;
  }

  /** Appends transcript lines (the oldest dropped past the cap), creating the session when new. */
  async appendTranscript(sessionKey: string, ...entries: unknown[]): Promise<void> {
    if (entries.length === 0) return;
    await this.script('session-append-5', sessionKey, [
      Date.now(),
      '',
      ...entries.map((e) => JSON.stringify(e)),
    ]);
  }

  /**
   * Up to `limit` transcript lines from line number `from` on (from the oldest kept when `from` is
   * before it), with where the transcript starts and ends; one script, so a page is consistent.
   */
  async transcriptPage(sessionKey: string, from: number, limit: number): Promise<TranscriptPage> {
    const [first, length, start, lines] = (await this.script('session-transcript-5', sessionKey, [
      from,
      limit,
    ])) as [number, number, number, string[]];
    return {
      first: Number(first),
      length: Number(length),
      from: Number(start),
      lines: lines.map((l) => JSON.parse(l) as unknown),
    };
  }

  /**
   * The current context's latest compaction and the message lines after it (one script, one round
   * trip): what a run's history is made of. Reads only the lines after the compaction.
   */
  async history(sessionKey: string): Promise<HistoryWindow> {
    const [contextFrom, start, length, compaction, pairs] = (await this.script(
      'session-history-5',
      sessionKey,
      [],
    )) as [number, number, number, string | null, (number | string)[]];
    const messages: HistoryMessage[] = [];
    for (let i = 0; i + 1 < pairs.length; i += 2) {
      const line = JSON.parse(String(pairs[i + 1])) as { role?: string; text?: string };
      messages.push({ index: Number(pairs[i]), role: line.role ?? 'user', text: line.text ?? '' });
    }
    return {
      contextFrom: Number(contextFrom),
      start: Number(start),
      length: Number(length),
      compaction: compaction ? (JSON.parse(compaction) as CompactionRecord) : null,
      messages,
    };
  }

  /**
   * Records a compaction (the session's record and the transcript line together) unless the
   * context or its latest compaction moved since `read` was read; true when recorded.
   */
  async compact(
    sessionKey: string,
    read: Pick<HistoryWindow, 'contextFrom' | 'compaction'>,
    record: CompactionRecord,
    entry: unknown,
  ): Promise<boolean> {
    return (
      (await this.script('session-compact-5', sessionKey, [
        read.contextFrom,
        read.compaction?.covers.toIndex ?? -1,
        JSON.stringify(record),
        JSON.stringify(entry),
      ])) === 1
    );
  }

  /** Adds an event to the session's environment; returns the new version. */
  async addEnvironmentEvent(sessionKey: string, event: unknown, cap: number): Promise<number> {
    const k = sessionKeys(this.prefix, sessionKey);
    const tx = slotMulti(this.redis)
      .hincrby(k.meta, 'envVersion', 1)
      .hsetnx(k.meta, 'createdAt', String(Date.now()))
      .rpush(k.env, JSON.stringify(event))
      .ltrim(k.env, -cap, -1);
    const [replies] = await Promise.all([this.touch(tx, sessionKey).exec(), this.noteActive(sessionKey)]);
    return Number(replies?.[0]?.[1] ?? 0);
  }

  async environment(sessionKey: string): Promise<{ version: number; events: unknown[] }> {
    const k = sessionKeys(this.prefix, sessionKey);
    const [version, events] = await Promise.all([
      this.redis.hget(k.meta, 'envVersion'),
      this.redis.lrange(k.env, 0, -1),
    ]);
    return { version: Number(version ?? 0), events: events.map((e) => JSON.parse(e) as unknown) };
  }

  /** The agent the session is bound to; null before its first message. */
  async agent(sessionKey: string): Promise<string | null> {
    return this.redis.hget(sessionKeys(this.prefix, sessionKey).meta, 'agentId');
  }

  /**
   * Binds the session to `agentId` unless it is bound already (its first message binds it, for
   * the session's life: `/new` and `/reset` keep it), and answers the agent it is bound to.
   */
  async bindAgent(sessionKey: string, agentId: string): Promise<string> {
    const k = sessionKeys(this.prefix, sessionKey);
    const known = await this.redis.hget(k.meta, 'agentId');
    if (known) return known;
    const [replies] = await Promise.all([
      this.touch(
        slotMulti(this.redis).hsetnx(k.meta, 'agentId', agentId).hget(k.meta, 'agentId'),
        sessionKey,
      ).exec(),
      this.noteActive(sessionKey),
    ]);
    const [err, bound] = replies?.[1] ?? [null, null];
    if (err) throw err;
    return (bound as string | null) ?? agentId;
  }

  /** The bootstrap files as snapshotted for the current context, snapshotting `read()` if none yet. */
  async bootstrap(
    sessionKey: string,
    read: () => Promise<WorkspaceFile[]>,
  ): Promise<{ files: WorkspaceFile[]; fresh: boolean }> {
    const k = sessionKeys(this.prefix, sessionKey);
    const known = await this.redis.hget(k.meta, 'bootstrap');
    if (known) return { files: JSON.parse(known) as WorkspaceFile[], fresh: false };
    const files = await read();
    const [replies] = await Promise.all([
      this.touch(slotMulti(this.redis).hsetnx(k.meta, 'bootstrap', JSON.stringify(files)), sessionKey).exec(),
      this.noteActive(sessionKey),
    ]);
    if (replies?.[0]?.[1] === 1) return { files, fresh: true };
    return {
      files: JSON.parse((await this.redis.hget(k.meta, 'bootstrap')) ?? '[]') as WorkspaceFile[],
      fresh: false,
    };
  }

  /**
   * Makes the session exist before its first message (a LangGraph thread created empty): its
   * creation time, and `metadata` (JSON, the caller's to bound) when given. A session that exists
   * keeps its creation time; its metadata is replaced only when given.
   */
  async open(sessionKey: string, metadata?: string): Promise<void> {
    const k = sessionKeys(this.prefix, sessionKey);
    const tx = slotMulti(this.redis).hsetnx(k.meta, 'createdAt', String(Date.now()));
    if (metadata !== undefined) tx.hset(k.meta, 'metadata', metadata);
    await Promise.all([this.touch(tx, sessionKey).exec(), this.noteActive(sessionKey)]);
  }

  /** The metadata `open` kept (JSON); null when none was given. */
  metadata(sessionKey: string): Promise<string | null> {
    return this.redis.hget(sessionKeys(this.prefix, sessionKey).meta, 'metadata');
  }

  /**
   * Deletes the session: every key of it, and its place in its tenant's list and in the busy set.
   * Its lane's runs are the caller's to cancel first (`stop`).
   */
  async delete(sessionKey: string): Promise<void> {
    const k = sessionKeys(this.prefix, sessionKey);
    await slotMulti(this.redis)
      .unlink(...sessionKeyList(k), k.seen, k.replying)
      .exec();
    await Promise.all([
      this.redis.zrem(tenantSessionsKey(this.prefix, unscopeName(sessionKey).tenant), sessionKey),
      this.forgetBusy(sessionKey),
    ]);
  }

  async view(sessionKey: string): Promise<SessionView | null> {
    const k = sessionKeys(this.prefix, sessionKey);
    const [meta, queue, buffered] = await Promise.all([
      this.redis.hgetall(k.meta),
      this.redis.lrange(k.queue, 0, -1),
      this.redis.llen(k.buffer),
    ]);
    if (!meta.createdAt) return null;
    return viewOf(sessionKey, {
      createdAt: meta.createdAt,
      contextId: meta.contextId ?? null,
      running: meta.running ?? null,
      mode: meta.mode ?? null,
      agentId: meta.agentId ?? null,
      envVersion: meta.envVersion ?? null,
      queue,
      buffered,
    });
  }

  /**
   * Sets the session's default lane mode (null: back to the deployment's) and records the command
   * in the transcript, in one step.
   */
  async setMode(sessionKey: string, mode: LaneMode | null, entry: unknown): Promise<void> {
    await this.script('session-append-5', sessionKey, [Date.now(), mode ?? '-', JSON.stringify(entry)]);
  }

  async mode(sessionKey: string): Promise<LaneMode | null> {
    return (await this.redis.hget(sessionKeys(this.prefix, sessionKey).meta, 'mode')) as LaneMode | null;
  }
}

/** A session's lane from its hash's fields, its queue and the length of its collect buffer. */
function viewOf(
  sessionKey: string,
  raw: {
    createdAt: string;
    contextId: string | null;
    running: string | null;
    mode: string | null;
    agentId: string | null;
    envVersion: string | null;
    queue: readonly string[];
    buffered: number;
  },
): SessionView {
  return {
    sessionKey,
    createdAt: new Date(Number(raw.createdAt)).toISOString(),
    contextId: Number(raw.contextId ?? 1),
    running: raw.running ? raw.running : null,
    queued: raw.queue.map((item) =>
      item === 'collect'
        ? { kind: 'collect' as const, messages: raw.buffered }
        : { kind: 'run' as const, runId: item },
    ) as SessionView['queued'],
    mode: (raw.mode as LaneMode | null) ?? null,
    agentId: raw.agentId ? raw.agentId : null,
    environmentVersion: Number(raw.envVersion ?? 0),
  };
}
