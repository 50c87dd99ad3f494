/**
 * Each tenant's events and what its triggers hold of them, in Redis: every event recorded once per
 * dedupe window, its batches' pending events and the events each flush took, its debounce keys'
 * latest events. Every key is under the tenant's tag `{t:<tenant>}` and has a TTL; each change of
 * more than one command is one script (`lua-trigger/`), so a crash never leaves half of one.
 */
import { StoredEvent } from '../domain/event.js';
import type { RedisClient } from './redis-client.js';
import { eventKeys, keyHash, type EventKeys } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

export interface EventStoreOptions {
  readonly prefix: string;
  /** How long an event's id is remembered (`TETRALOOP_EVENTS_DEDUPE_SECONDS`), in ms. */
  readonly dedupeMs: number;
  /** Most events one batch holds pending (`TETRALOOP_TRIGGER_BATCH_PENDING_MAX`). */
  readonly batchPendingMax: number;
}

/** What recording an event found: a new event, or one seen within the window (handed on or not). */
export type RecordOutcome = 'new' | 'seen' | 'handed';
const OUTCOMES: readonly RecordOutcome[] = ['new', 'seen', 'handed'];

/** The flushes adding an event to a batch asks for (each by its number), or that it was dropped. */
export type BatchDecision =
  | { readonly dropped: true }
  | {
      readonly dropped: false;
      readonly flushes: readonly { readonly at: 'timer' | 'now'; readonly n: number }[];
    };

/** Parses what `batch-add-3` answers. Pure. */
export function batchDecisionOf(answer: string): BatchDecision {
  if (answer === 'dropped') return { dropped: true };
  if (answer === '-') return { dropped: false, flushes: [] };
  return {
    dropped: false,
    flushes: answer.split(',').map((part) => {
      const [at, n] = part.split(':');
      return { at: at === 'now' ? 'now' : 'timer', n: Number(n) };
    }),
  };
}

/** A batch: the trigger and the hash of its key's value. */
export interface BatchRef {
  readonly triggerId: string;
  readonly keyHash: string;
}

export class EventStore {
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    readonly options: EventStoreOptions,
  ) {
    this.script = loadScripts(redis);
  }

  private keys(tenant: string): EventKeys {
    return eventKeys(this.options.prefix, tenant);
  }

  /** Records an event once per window; its `seq` is its place among the tenant's events. */
  async record(
    tenant: string,
    event: Omit<StoredEvent, 'seq'>,
  ): Promise<{ outcome: RecordOutcome; seq: number }> {
    const k = this.keys(tenant);
    const [code, seq] = (await this.script(
      'record-event-2',
      [k.event(keyHash(event.id)), k.seq],
      [JSON.stringify(event), this.options.dedupeMs],
    )) as [number, number];
    return { outcome: OUTCOMES[code] ?? 'handed', seq };
  }

  /** Marks an event as handed to the sense loop (a repeat of its id then hands nothing). */
  async markHanded(tenant: string, eventId: string): Promise<void> {
    await this.redis.hset(this.keys(tenant).event(keyHash(eventId)), 'q', '1');
  }

  /** An event recorded within the window; null once it expired. */
  async read(tenant: string, eventId: string): Promise<StoredEvent | null> {
    const [json, seq] = await this.redis.hmget(this.keys(tenant).event(keyHash(eventId)), 'e', 'seq');
    if (json === null || json === undefined || seq === null || seq === undefined) return null;
    return StoredEvent.parse({ ...(JSON.parse(json) as object), seq: Number(seq) });
  }

  /** Adds an event to a batch once (a repeat answers the first decision). */
  async addToBatch(
    tenant: string,
    batch: BatchRef,
    event: StoredEvent,
    maxSize: number,
    maxWaitMs: number,
  ): Promise<BatchDecision> {
    const k = this.keys(tenant);
    const pending = k.batch(batch.triggerId, batch.keyHash);
    const answer = (await this.script(
      'batch-add-3',
      [k.event(keyHash(event.id)), pending, `${pending}:n`],
      [
        batch.triggerId,
        JSON.stringify(event),
        event.seq,
        maxSize,
        this.options.batchPendingMax,
        // Pending events outlive their wait by the dedupe window: workers may be down a while.
        this.options.dedupeMs + maxWaitMs,
      ],
    )) as string;
    return batchDecisionOf(answer);
  }

  /** The events flush `n` of a batch takes (the same on a retry; none once its run exists). */
  async takeBatch(tenant: string, batch: BatchRef, n: number, maxSize: number): Promise<StoredEvent[]> {
    const k = this.keys(tenant);
    const json = (await this.script(
      'batch-take-2',
      [k.batch(batch.triggerId, batch.keyHash), k.taken(batch.triggerId, batch.keyHash, n)],
      [maxSize, this.options.dedupeMs],
    )) as string;
    return (JSON.parse(json) as unknown[]).map((e) => StoredEvent.parse(e));
  }

  /** Flush `n`'s run exists: a retry of it takes nothing. */
  async finishBatch(tenant: string, batch: BatchRef, n: number): Promise<void> {
    await this.redis.set(this.keys(tenant).taken(batch.triggerId, batch.keyHash, n), '[]', 'KEEPTTL');
  }

  /** Notes an event as its debounce key's latest (unless a later one is noted or consumed). */
  async noteDebounce(tenant: string, debounce: BatchRef, event: StoredEvent, ms: number): Promise<boolean> {
    const answer = await this.script(
      'debounce-note-1',
      [this.keys(tenant).debounce(debounce.triggerId, debounce.keyHash)],
      [event.seq, JSON.stringify(event), this.options.dedupeMs + ms],
    );
    return answer === 1;
  }

  /** A debounce key's latest event, unless a run already consumed it. */
  async latestDebounce(tenant: string, debounce: BatchRef): Promise<StoredEvent | null> {
    const [json, done] = await this.redis.hmget(
      this.keys(tenant).debounce(debounce.triggerId, debounce.keyHash),
      'e',
      'done',
    );
    if (!json) return null;
    const event = StoredEvent.parse(JSON.parse(json));
    return done !== null && done !== undefined && Number(done) >= event.seq ? null : event;
  }

  /** A run consumed the debounce key's events up to `seq`. */
  async finishDebounce(tenant: string, debounce: BatchRef, seq: number): Promise<void> {
    await this.script(
      'debounce-done-1',
      [this.keys(tenant).debounce(debounce.triggerId, debounce.keyHash)],
      [seq],
    );
  }
}
