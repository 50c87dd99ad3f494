/**
 * Follows the event streams of many runs on a few blocking connections: each reader of a small
 * pool holds one connection and runs `XREAD BLOCK … STREAMS k1 k2 … id1 id2 …` over the runs it
 * follows (at most `maxKeysPerRead` keys per call), fanning the entries out to the feeds of each
 * run. A feed replays what it missed with a non-blocking `XRANGE` on the shared client before it
 * takes live entries, and drops every entry it already has (by seq), so nothing is missed and
 * nothing is seen twice. When a run is followed anew, its reader's blocking call is cut short
 * (`CLIENT UNBLOCK`) so the next call names it.
 */
import { isCluster, type RedisClient } from '../state/redis-client.js';
import { setTimeout as delay } from 'node:timers/promises';
import type { RunEvent } from '../domain/run-model.js';
import type { RunEventLog } from '../state/runs/run-event-log.js';

export interface RunEventHubOptions {
  /** Opens the connection of reader `index` (blocking reads only). */
  readonly connect: (index: number) => RedisClient;
  /** A shared connection that never blocks: cuts a reader's blocking call short. */
  readonly client: RedisClient;
  /** Readers, each with its own connection. @defaultValue 2 */
  readonly readers?: number;
  /** Most streams named in one `XREAD`; a reader following more reads them in turns. @defaultValue 500 */
  readonly maxKeysPerRead?: number;
  /** How long one blocking read waits when it has nothing. @defaultValue 5000 */
  readonly blockMs?: number;
  /** Told of a reader's failed read (it retries). */
  readonly onError?: (err: Error) => void;
}

/** Events per replay page. */
const REPLAY_PAGE = 1000;
/** Block of each read of a reader that reads its runs in turns (so no turn waits long). */
const TURN_BLOCK_MS = 50;
/** Pause of a reader after a failed read. */
const RETRY_MS = 500;

/** One followed run: its stream's cursor (the highest seq the hub read) and its feeds. */
interface Topic {
  readonly runId: string;
  afterSeq: number;
  readonly feeds: Set<RunEventFeed>;
  readonly reader: Reader;
}

/** The events of one run for one follower, replay first, then live; see `next`. */
export class RunEventFeed {
  private replayed = false;
  private buffer: RunEvent[] = [];
  private wake: (() => void) | undefined;
  private closedFlag = false;

  /** @internal made by `RunEventHub.follow` */
  constructor(
    private readonly hub: RunEventHub,
    readonly runId: string,
    private after: number,
  ) {}

  /** True once closed by its follower or by the hub. */
  get closed(): boolean {
    return this.closedFlag;
  }

  /** @internal live entries from the hub's reader */
  push(events: readonly RunEvent[]): void {
    for (const e of events) {
      const last = this.buffer.at(-1)?.seq ?? this.after;
      if (e.seq > last) this.buffer.push(e);
    }
    if (this.buffer.length > 0) this.wake?.();
  }

  /**
   * The next events after the last ones it returned, oldest first: the stored ones (a replay page)
   * while there are any, then live ones; waits up to `timeoutMs` for some (empty when none came,
   * or when the feed closed).
   */
  async next(timeoutMs: number): Promise<RunEvent[]> {
    for (;;) {
      if (this.closedFlag) return [];
      if (!this.replayed) {
        const page = await this.hub.store.events(this.runId, this.after, REPLAY_PAGE);
        if (page.length < REPLAY_PAGE) this.replayed = true;
        if (page.length > 0) return this.take(page);
      }
      this.buffer = this.buffer.filter((e) => e.seq > this.after);
      const first = this.buffer[0];
      // Seqs have no gaps: a buffer that does not start right after the last one returned missed
      // something (it cannot, by the order of follow and replay, but the stream is the truth).
      if (first && first.seq !== this.after + 1) {
        this.replayed = false;
        continue;
      }
      if (first || timeoutMs <= 0) return this.take(this.buffer.splice(0));
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        this.wake = done;
      });
      timeoutMs = 0;
    }
  }

  /** Stops following; the hub forgets the run when no feed follows it. */
  close(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.wake?.();
    this.hub.unfollow(this);
  }

  private take(events: RunEvent[]): RunEvent[] {
    const last = events.at(-1);
    if (last) {
      this.after = last.seq;
      this.hub.replayedTo(this, last.seq);
    }
    return events;
  }
}

/** One reader: a connection, the runs it follows, and its read loop. */
class Reader {
  readonly topics = new Map<string, Topic>();
  private clientId: number | undefined;
  /** A blocking read is outstanding. */
  private reading = false;
  /** A run was added since the outstanding read was sent. */
  private dirty = false;
  /** Which turn goes first next time, so that rebuilds do not starve the later turns. */
  private round = 0;
  private unblocking = false;
  private idle: (() => void) | undefined;
  readonly done: Promise<void>;

  constructor(
    private readonly hub: RunEventHub,
    private readonly connection: RedisClient,
    private readonly options: Required<Omit<RunEventHubOptions, 'onError' | 'connect'>> &
      Pick<RunEventHubOptions, 'onError'>,
  ) {
    // A reconnected connection has a new id.
    connection.on('ready', () => (this.clientId = undefined));
    this.done = this.loop();
  }

  add(topic: Topic): void {
    this.topics.set(topic.runId, topic);
    this.dirty = true;
    this.idle?.();
    if (this.reading) void this.unblock();
  }

  /** The outstanding read may still name the run: what it brings for it is dropped. */
  remove(runId: string): void {
    this.topics.delete(runId);
  }

  stop(): void {
    this.idle?.();
    this.connection.disconnect();
  }

  private async loop(): Promise<void> {
    while (!this.hub.isClosed) {
      if (this.topics.size === 0) {
        await new Promise<void>((resolve) => (this.idle = resolve));
        this.idle = undefined;
        continue;
      }
      // The snapshot and the flag go together: a run followed from here on sets it again.
      this.dirty = false;
      const topics = [...this.topics.values()];
      const turns: Topic[][] = [];
      for (let i = 0; i < topics.length; i += this.options.maxKeysPerRead) {
        turns.push(topics.slice(i, i + this.options.maxKeysPerRead));
      }
      const blockMs = turns.length === 1 ? this.options.blockMs : TURN_BLOCK_MS;
      const first = this.round++ % turns.length;
      turns.push(...turns.splice(0, first));
      try {
        this.clientId ??= Number(await this.connection.client('ID'));
        for (const turn of turns) {
          if (this.dirty || this.hub.isClosed) break;
          const cursors = turn.map((t) => ({ runId: t.runId, afterSeq: t.afterSeq }));
          // Set in the same tick as the read is sent: from here on a new run cuts it short.
          this.reading = true;
          let found: Map<string, RunEvent[]>;
          try {
            found = await this.hub.store.readEventStreams(this.connection, cursors, blockMs);
          } finally {
            this.reading = false;
          }
          this.deliver(found);
        }
      } catch (err) {
        if (this.hub.isClosed) return;
        this.options.onError?.(err as Error);
        await delay(RETRY_MS);
      }
    }
  }

  /** Hands each run's entries to its feeds, and moves its cursor past them. */
  private deliver(found: Map<string, RunEvent[]>): void {
    for (const [runId, events] of found) {
      const topic = this.topics.get(runId);
      const last = events.at(-1);
      if (!topic || !last) continue;
      topic.afterSeq = Math.max(topic.afterSeq, last.seq);
      for (const feed of topic.feeds) feed.push(events);
    }
  }

  /**
   * Cuts the outstanding read short so the next one names the new runs. `CLIENT UNBLOCK` answers 0
   * when the read has not reached Redis yet; it is tried again a few times, after which the read
   * just ends at its block time.
   */
  private async unblock(): Promise<void> {
    // On a Redis Cluster the reads poll (see RunEventLog.readEventStreams): the next poll names the run.
    if (this.unblocking || isCluster(this.connection)) return;
    this.unblocking = true;
    try {
      for (let i = 0; i < 20 && this.reading && this.dirty && !this.hub.isClosed; i++) {
        if (this.clientId !== undefined) {
          const unblocked = await this.options.client.client('UNBLOCK', this.clientId);
          if (Number(unblocked) === 1) return;
        }
        await delay(5);
      }
    } catch (err) {
      this.options.onError?.(err as Error);
    } finally {
      this.unblocking = false;
    }
  }
}

export class RunEventHub {
  private readonly topics = new Map<string, Topic>();
  private readonly readers: Reader[];
  private closedFlag = false;

  constructor(
    readonly store: Pick<RunEventLog, 'events' | 'readEventStreams'>,
    options: RunEventHubOptions,
  ) {
    const settings = {
      client: options.client,
      readers: options.readers ?? 2,
      maxKeysPerRead: options.maxKeysPerRead ?? 500,
      blockMs: options.blockMs ?? 5000,
      ...(options.onError ? { onError: options.onError } : {}),
    };
    this.readers = Array.from(
      { length: Math.max(1, settings.readers) },
      (_, i) => new Reader(this, options.connect(i), settings),
    );
  }

  get isClosed(): boolean {
    return this.closedFlag;
  }

  /** Runs followed now (each by one or more feeds). */
  get followed(): number {
    return this.topics.size;
  }

  /**
   * Follows a run's events after `afterSeq`. The feed is registered before it replays anything,
   * so every event appended from now on reaches it live or by its replay.
   */
  follow(runId: string, afterSeq: number): RunEventFeed {
    const feed = new RunEventFeed(this, runId, afterSeq);
    if (this.closedFlag) {
      feed.close();
      return feed;
    }
    let topic = this.topics.get(runId);
    if (!topic) {
      const reader = this.readers.reduce((a, b) => (b.topics.size < a.topics.size ? b : a));
      topic = { runId, afterSeq, feeds: new Set(), reader };
      this.topics.set(runId, topic);
      topic.feeds.add(feed);
      reader.add(topic);
    } else {
      topic.feeds.add(feed);
    }
    return feed;
  }

  /** @internal a feed closed */
  unfollow(feed: RunEventFeed): void {
    const topic = this.topics.get(feed.runId);
    if (!topic?.feeds.delete(feed) || topic.feeds.size > 0) return;
    this.topics.delete(feed.runId);
    topic.reader.remove(feed.runId);
  }

  /**
   * @internal a feed returned events up to `seq`. When it is the run's only feed, the hub's cursor
   * moves there too, so live reads do not fetch what the replay already had. (With other feeds it
   * may not: one of them may still count on the live reads for entries before `seq`.)
   */
  replayedTo(feed: RunEventFeed, seq: number): void {
    const topic = this.topics.get(feed.runId);
    if (topic?.feeds.size === 1 && topic.feeds.has(feed)) topic.afterSeq = Math.max(topic.afterSeq, seq);
  }

  /** Closes every feed and every reader's connection. */
  async close(): Promise<void> {
    if (this.closedFlag) return;
    this.closedFlag = true;
    for (const topic of [...this.topics.values()]) for (const feed of [...topic.feeds]) feed.close();
    for (const reader of this.readers) reader.stop();
    await Promise.allSettled(this.readers.map((r) => r.done));
  }
}
