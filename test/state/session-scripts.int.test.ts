/**
 * Each lane script, called through SessionStore against a real Redis: what it answers and what it
 * leaves in the session's hash and lists (read back with a plain client).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it, vi } from 'vitest';
import {
  SessionStore,
  busySessionsKey,
  sessionKeyList,
  sessionKeys,
  tenantSessionsKey,
  type DropPolicy,
  type LaneMessage,
  type LaneMode,
} from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const sessions = new SessionStore(redis, prefix);

afterAll(async () => {
  await redis.quit();
});

const message = (text: string): LaneMessage => ({ text, receivedAt: `at-${text}` });
const busy = busySessionsKey(prefix);

function admit(
  session: string,
  mode: LaneMode,
  runId: string,
  options: { collectCap?: number; drop?: DropPolicy; envCap?: number; followupCap?: number } = {},
): ReturnType<SessionStore['admit']> {
  return sessions.admit(session, {
    mode,
    runId,
    message: message(runId),
    collectCap: options.collectCap ?? 3,
    drop: options.drop ?? 'old',
    envCap: options.envCap ?? 5,
    followupCap: options.followupCap ?? 100,
  });
}

/** A session whose lane is held by run r1. */
async function busySession(): Promise<string> {
  const session = randomUUID();
  await admit(session, 'followup', 'r1');
  return session;
}

async function lane(
  session: string,
): Promise<{ running: string | null; queue: string[]; buffer: unknown[] }> {
  const k = sessionKeys(prefix, session);
  return {
    running: await redis.hget(k.meta, 'running'),
    queue: await redis.lrange(k.queue, 0, -1),
    buffer: (await redis.lrange(k.buffer, 0, -1)).map((m) => JSON.parse(m) as unknown),
  };
}

describe('lane-admit', () => {
  it('starts the message’s run on an idle lane and marks the session busy', async () => {
    const session = randomUUID();
    expect(await admit(session, 'collect', 'r1')).toEqual({ kind: 'start', runId: 'r1' });
    const meta = await redis.hgetall(sessionKeys(prefix, session).meta);
    expect(meta).toMatchObject({ running: 'r1', contextId: '1', createdAt: expect.any(String) });
    expect(await lane(session)).toEqual({ running: 'r1', queue: [], buffer: [] });
    expect(await redis.sismember(busy, session)).toBe(1);
  });

  it('queues followup runs behind the running one, in order', async () => {
    const session = await busySession();
    expect(await admit(session, 'followup', 'r2')).toEqual({ kind: 'queued', runId: 'r2', position: 1 });
    expect(await admit(session, 'followup', 'r3')).toEqual({ kind: 'queued', runId: 'r3', position: 2 });
    expect(await lane(session)).toEqual({ running: 'r1', queue: ['r2', 'r3'], buffer: [] });
    expect(await sessions.position(session, 'r3')).toBe(2);
  });

  it('refuses a followup run past the cap of waiting runs, changing nothing; the collect marker does not count', async () => {
    const session = await busySession();
    await admit(session, 'followup', 'r2', { followupCap: 2 });
    await admit(session, 'collect', 'm1', { followupCap: 2 });
    expect(await admit(session, 'followup', 'r3', { followupCap: 2 })).toMatchObject({ kind: 'queued' });
    expect(await sessions.followupFull(session, 2)).toBe(true);
    expect(await sessions.followupFull(session, 3)).toBe(false);
    const before = await lane(session);
    expect(await admit(session, 'followup', 'r4', { followupCap: 2 })).toEqual({ kind: 'full', cap: 2 });
    expect(await lane(session)).toEqual(before);
    expect(before.queue).toEqual(['r2', 'collect', 'r3']);
    // Other modes are not held to it.
    expect(await admit(session, 'collect', 'm2', { followupCap: 2 })).toMatchObject({ kind: 'collected' });
    // An idle lane is never full.
    expect(await sessions.followupFull(randomUUID(), 1)).toBe(false);
  });

  it('collects messages into the buffer behind one collect marker', async () => {
    const session = await busySession();
    await admit(session, 'followup', 'r2');
    expect(await admit(session, 'collect', 'm1')).toEqual({ kind: 'collected', position: 2 });
    expect(await admit(session, 'collect', 'm2')).toEqual({ kind: 'collected', position: 2 });
    expect(await lane(session)).toEqual({
      running: 'r1',
      queue: ['r2', 'collect'],
      buffer: [message('m1'), message('m2')],
    });
    expect(await redis.hget(sessionKeys(prefix, session).meta, 'lastCollectAt')).toMatch(/^\d+$/);
  });

  it('drops a collected message when the buffer is full and the policy is new', async () => {
    const session = await busySession();
    await admit(session, 'collect', 'm1', { collectCap: 2, drop: 'new' });
    await admit(session, 'collect', 'm2', { collectCap: 2, drop: 'new' });
    expect(await admit(session, 'collect', 'm3', { collectCap: 2, drop: 'new' })).toEqual({
      kind: 'dropped',
    });
    expect((await lane(session)).buffer).toEqual([message('m1'), message('m2')]);
  });

  it('drops the oldest collected message when the buffer is full and the policy is old', async () => {
    const session = await busySession();
    for (const m of ['m1', 'm2', 'm3']) await admit(session, 'collect', m, { collectCap: 2, drop: 'old' });
    expect((await lane(session)).buffer).toEqual([message('m2'), message('m3')]);
  });

  it('folds the two oldest collected messages into one when the buffer is full and the policy is summarize', async () => {
    const session = await busySession();
    for (const m of ['m1', 'm2', 'm3', 'm4'])
      await admit(session, 'collect', m, { collectCap: 3, drop: 'summarize' });
    expect((await lane(session)).buffer).toEqual([
      { text: 'm1\nm2', receivedAt: 'at-m1', summarized: 2 },
      message('m3'),
      message('m4'),
    ]);
    await admit(session, 'collect', 'm5', { collectCap: 3, drop: 'summarize' });
    expect((await lane(session)).buffer).toEqual([
      { text: 'm1\nm2\nm3', receivedAt: 'at-m1', summarized: 3 },
      message('m4'),
      message('m5'),
    ]);
  });

  it('steers a message into the environment of the running run, capped', async () => {
    const session = await busySession();
    expect(await admit(session, 'steer', 's1', { envCap: 2 })).toEqual({
      kind: 'steered',
      runId: 'r1',
      version: 1,
    });
    await admit(session, 'steer', 's2', { envCap: 2 });
    expect(await admit(session, 'steer', 's3', { envCap: 2 })).toEqual({
      kind: 'steered',
      runId: 'r1',
      version: 3,
    });
    expect(await sessions.environment(session)).toEqual({
      version: 3,
      events: [message('s2'), message('s3')],
    });
    expect(await lane(session)).toEqual({ running: 'r1', queue: [], buffer: [] });
  });

  it('interrupts the running run: the new run takes the lane, the queue stays', async () => {
    const session = await busySession();
    await admit(session, 'followup', 'r2');
    expect(await admit(session, 'interrupt', 'r3')).toEqual({ kind: 'interrupt', cancel: 'r1', runId: 'r3' });
    expect(await lane(session)).toEqual({ running: 'r3', queue: ['r2'], buffer: [] });
  });

  it('admits a message id once within the window, with its transcript line, and changes nothing the second time', async () => {
    const session = randomUUID();
    const k = sessionKeys(prefix, session);
    const once = (runId: string, id: string, windowMs = 60_000) =>
      sessions.admit(session, {
        mode: 'followup',
        runId,
        message: message(runId),
        collectCap: 3,
        drop: 'old',
        envCap: 5,
        followupCap: 100,
        once: { id, windowMs },
        line: { type: 'message', role: 'user', text: runId },
      });
    const lines = async (): Promise<unknown[]> =>
      (await redis.lrange(k.transcript, 0, -1)).map((l) => JSON.parse(l) as unknown);
    expect(await once('r1', 'event:a')).toEqual({ kind: 'start', runId: 'r1' });
    expect(await once('r2', 'event:b')).toEqual({ kind: 'queued', runId: 'r2', position: 1 });
    // A retry of b (another run prepared for it) and a second handling of a: nothing moves.
    expect(await once('r2-again', 'event:b')).toEqual({ kind: 'duplicate' });
    expect(await once('r1', 'event:a')).toEqual({ kind: 'duplicate' });
    expect(await lane(session)).toEqual({ running: 'r1', queue: ['r2'], buffer: [] });
    expect(await lines()).toEqual([
      { type: 'message', role: 'user', text: 'r1' },
      { type: 'message', role: 'user', text: 'r2' },
    ]);
    expect(await sessions.seen(session, 'event:b', 60_000)).toBe(true);
    expect(await sessions.seen(session, 'event:c', 60_000)).toBe(false);
    // The ids live for the window: the key expires with it, and an id older than it is admitted again.
    expect(await redis.pttl(k.seen)).toBeGreaterThan(50_000);
    await redis.zadd(k.seen, Date.now() - 120_000, 'event:old');
    expect(await sessions.seen(session, 'event:old', 60_000)).toBe(false);
    expect(await once('r3', 'event:old')).toEqual({ kind: 'queued', runId: 'r3', position: 2 });
    expect(Number(await redis.zscore(k.seen, 'event:old'))).toBeGreaterThan(Date.now() - 60_000);
  });

  it('keeps as many message ids as transcript lines, the newest', async () => {
    const capped = new SessionStore(redis, prefix, { transcriptMaxLines: 3 });
    const session = randomUUID();
    for (let i = 0; i < 5; i++) {
      await capped.admit(session, {
        mode: 'followup',
        runId: `r${i}`,
        message: message(`r${i}`),
        collectCap: 3,
        drop: 'old',
        envCap: 5,
        followupCap: 100,
        once: { id: `event:${i}`, windowMs: 60_000 },
      });
    }
    expect(await redis.zrange(sessionKeys(prefix, session).seen, '0', '-1')).toEqual([
      'event:2',
      'event:3',
      'event:4',
    ]);
  });
});

describe('lane-advance', () => {
  it('does nothing when the finished run no longer holds the lane', async () => {
    const session = await busySession();
    await admit(session, 'followup', 'r2');
    expect(await sessions.advance(session, 'r0', 0)).toEqual({ kind: 'noop' });
    expect(await lane(session)).toEqual({ running: 'r1', queue: ['r2'], buffer: [] });
  });

  it('frees the lane when nothing waits and drops the session from the busy set', async () => {
    const session = await busySession();
    expect(await sessions.advance(session, 'r1', 0)).toEqual({ kind: 'idle' });
    expect(await lane(session)).toEqual({ running: '', queue: [], buffer: [] });
    expect(await sessions.running(session)).toBeNull();
    expect(await redis.sismember(busy, session)).toBe(0);
    expect((await admit(session, 'followup', 'r2')).kind).toBe('start');
  });

  it('hands the lane to the next queued run', async () => {
    const session = await busySession();
    await admit(session, 'followup', 'r2');
    await admit(session, 'followup', 'r3');
    expect(await sessions.advance(session, 'r1', 0)).toEqual({ kind: 'run', runId: 'r2' });
    expect(await lane(session)).toEqual({ running: 'r2', queue: ['r3'], buffer: [] });
  });

  it('holds the lane for collected messages until the debounce has passed', async () => {
    const session = await busySession();
    await admit(session, 'collect', 'm1');
    const lastCollectAt = Number(await redis.hget(sessionKeys(prefix, session).meta, 'lastCollectAt'));
    const debounce = 3_600_000;
    expect(await sessions.advance(session, 'r1', debounce)).toEqual({
      kind: 'collect-wait',
      dueAt: lastCollectAt + debounce,
    });
    expect(await lane(session)).toEqual({ running: 'collect', queue: ['collect'], buffer: [message('m1')] });
  });

  it('answers how many collected messages are due once the debounce has passed', async () => {
    const session = await busySession();
    await admit(session, 'collect', 'm1');
    await admit(session, 'collect', 'm2');
    expect(await sessions.advance(session, 'r1', 3_600_000)).toMatchObject({ kind: 'collect-wait' });
    // The lane is now held by the collect marker; advancing from it re-checks the debounce.
    expect(await sessions.advance(session, 'collect', 0)).toEqual({ kind: 'collect', count: 2 });
    expect(await lane(session)).toEqual({
      running: 'collect',
      queue: ['collect'],
      buffer: [message('m1'), message('m2')],
    });
    expect(await sessions.collected(session, 1)).toEqual([message('m1')]);
  });
});

describe('lane-commit-collect', () => {
  /** A lane held by the collect marker with `texts` collected, r9 queued behind them. */
  async function collecting(texts: string[]): Promise<string> {
    const session = await busySession();
    for (const t of texts) await admit(session, 'collect', t);
    await admit(session, 'followup', 'r9');
    await sessions.advance(session, 'r1', 0);
    return session;
  }

  it('hands the lane to the collected run and removes the marker once the buffer is empty', async () => {
    const session = await collecting(['m1', 'm2']);
    expect(await sessions.commitCollect(session, 'rc', 2)).toBe(true);
    expect(await lane(session)).toEqual({ running: 'rc', queue: ['r9'], buffer: [] });
    expect(await sessions.advance(session, 'rc', 0)).toEqual({ kind: 'run', runId: 'r9' });
  });

  it('keeps the marker for messages collected after the count was taken', async () => {
    const session = await collecting(['m1', 'm2']);
    await admit(session, 'collect', 'm3');
    expect(await sessions.commitCollect(session, 'rc', 2)).toBe(true);
    expect(await lane(session)).toEqual({ running: 'rc', queue: ['collect', 'r9'], buffer: [message('m3')] });
  });

  it('refuses when the lane is not waiting for its collected run', async () => {
    const session = await busySession();
    await admit(session, 'collect', 'm1');
    expect(await sessions.commitCollect(session, 'rc', 1)).toBe(false);
    expect(await lane(session)).toEqual({ running: 'r1', queue: ['collect'], buffer: [message('m1')] });
  });
});

describe('lane-stop', () => {
  it('empties the lane and answers the running and queued runs to cancel', async () => {
    const session = await busySession();
    await admit(session, 'followup', 'r2');
    await admit(session, 'collect', 'm1');
    await admit(session, 'followup', 'r3');
    expect(await sessions.stop(session)).toEqual({ running: 'r1', queued: ['r2', 'r3'] });
    const k = sessionKeys(prefix, session);
    expect(await redis.exists(k.queue, k.buffer)).toBe(0);
    expect(await redis.hget(k.meta, 'running')).toBe('');
    expect(await redis.sismember(busy, session)).toBe(0);
  });

  it('answers no running run while the lane is held by collected messages', async () => {
    const session = await busySession();
    await admit(session, 'collect', 'm1');
    await sessions.advance(session, 'r1', 3_600_000);
    expect(await sessions.stop(session)).toEqual({ running: null, queued: [] });
    expect(await lane(session)).toEqual({ running: '', queue: [], buffer: [] });
  });

  it('answers nothing for an idle session', async () => {
    expect(await sessions.stop(randomUUID())).toEqual({ running: null, queued: [] });
  });
});

describe('session-reset', () => {
  it('starts a new context: the next id, no bootstrap snapshot, a transcript line, where it starts', async () => {
    const session = await busySession();
    const files = [{ name: 'AGENTS.md', content: 'v1' }];
    expect(await sessions.bootstrap(session, () => Promise.resolve(files))).toEqual({ files, fresh: true });
    const line = { type: 'command', command: 'reset' };
    expect(await sessions.reset(session, line)).toBe(2);
    const meta = await redis.hgetall(sessionKeys(prefix, session).meta);
    expect(meta.contextId).toBe('2');
    expect(meta.bootstrap).toBeUndefined();
    // The context's lines start after the command line.
    expect(meta.contextFrom).toBe('1');
    expect(new Date(meta.contextStartedAt!).toISOString()).toBe(meta.contextStartedAt);
    expect((await sessions.transcriptPage(session, 0, 1000)).lines).toEqual([line]);
    // The lane is not touched.
    expect(await sessions.running(session)).toBe('r1');
    const next = [{ name: 'AGENTS.md', content: 'v2' }];
    expect(await sessions.bootstrap(session, () => Promise.resolve(next))).toEqual({
      files: next,
      fresh: true,
    });
    expect(await sessions.reset(session, line)).toBe(3);
  });
});

describe('session-history and session-compact', () => {
  const user = (text: string) => ({ type: 'message', role: 'user', text, receivedAt: 'at' });
  const reply = (text: string) => ({
    type: 'message',
    role: 'assistant',
    text,
    runId: 'r',
    tools: '',
    at: 'at',
  });
  const record = (toIndex: number, summary = `up to ${toIndex}`) => ({
    summary,
    covers: { fromIndex: 0, toIndex, messages: 1 },
  });

  it('reads the message lines of the current context, each with its transcript index', async () => {
    const session = randomUUID();
    await sessions.appendTranscript(session, user('a'), { type: 'tool_call', runId: 'r' }, reply('b'));
    expect(await sessions.history(session)).toEqual({
      contextFrom: 0,
      start: 0,
      length: 3,
      compaction: null,
      messages: [
        { index: 0, role: 'user', text: 'a' },
        { index: 2, role: 'assistant', text: 'b' },
      ],
    });
    expect(await redis.hget(sessionKeys(prefix, session).meta, 'contextFrom')).toBe('0');
    // /new: the context starts after its command line, and its compaction is dropped.
    await sessions.compact(session, { contextFrom: 0, compaction: null }, record(1), { type: 'compaction' });
    await sessions.reset(session, { type: 'command', command: 'new', at: 'at' });
    await sessions.appendTranscript(session, user('c'));
    expect(await sessions.history(session)).toEqual({
      contextFrom: 5,
      start: 5,
      length: 6,
      compaction: null,
      messages: [{ index: 5, role: 'user', text: 'c' }],
    });
  });

  it('reads only the lines after the latest compaction, and records one only over what was read', async () => {
    const session = randomUUID();
    await sessions.appendTranscript(session, user('a'), reply('b'), user('c'), reply('d'), user('e'));
    const read = await sessions.history(session);
    const entry = { type: 'compaction', summary: 'up to 1' };
    expect(await sessions.compact(session, read, record(1), entry)).toBe(true);
    // A second compaction made from the same read lost the race: nothing is written.
    expect(await sessions.compact(session, read, record(2, 'other'), { type: 'compaction' })).toBe(false);
    const after = await sessions.history(session);
    expect(after).toMatchObject({ contextFrom: 0, start: 2, length: 6, compaction: record(1) });
    expect(after.messages.map((m) => m.text)).toEqual(['c', 'd', 'e']);
    expect((await sessions.transcriptPage(session, 0, 1000)).lines.at(-1)).toEqual(entry);
    expect((await sessions.transcriptPage(session, 0, 1000)).lines).toHaveLength(6);
    // A rolling compaction made from the new read is recorded.
    expect(await sessions.compact(session, after, record(3), { type: 'compaction' })).toBe(true);
    // One made before a /new is not.
    const stale = await sessions.history(session);
    await sessions.reset(session, { type: 'command', command: 'reset', at: 'at' });
    expect(await sessions.compact(session, stale, record(6), { type: 'compaction' })).toBe(false);
    expect(await redis.hget(sessionKeys(prefix, session).meta, 'compaction')).toBeNull();
  });

  it('finds where a context begun before contextFrom was recorded starts, once', async () => {
    const session = randomUUID();
    const k = sessionKeys(prefix, session);
    const lines = [
      user('old'),
      { type: 'command', command: 'new', at: 'at' },
      user('older context'),
      { type: 'command', command: 'reset', at: 'at' },
      user('current'),
      { type: 'run', runId: 'r' },
    ];
    await redis.rpush(k.transcript, ...lines.map((l) => JSON.stringify(l)));
    await redis.hset(k.meta, 'contextId', '3', 'createdAt', '1');
    expect(await sessions.history(session)).toMatchObject({
      contextFrom: 4,
      start: 4,
      messages: [{ index: 4, role: 'user', text: 'current' }],
    });
    expect(await redis.hget(k.meta, 'contextFrom')).toBe('4');
  });
});

describe('session-append, session-reply and session-transcript', () => {
  /** A store with a small cap and a short idle TTL, to see both at work. */
  const IDLE_MS = 60_000;
  const capped = new SessionStore(redis, prefix, { transcriptMaxLines: 3, idleTtlSeconds: IDLE_MS / 1000 });
  const line = (text: string) => ({ type: 'message', role: 'user', text });
  const texts = async (session: string): Promise<unknown[]> =>
    (await capped.transcriptPage(session, 0, 100)).lines.map((l) => (l as { text?: unknown }).text);
  const pttls = (session: string): Promise<number[]> =>
    Promise.all(sessionKeyList(sessionKeys(prefix, session)).map((key) => redis.pttl(key)));
  // `default` is the tenant of a session key without one.
  const listed = (session: string): Promise<string | null> =>
    redis.zscore(tenantSessionsKey(prefix, 'default'), session);

  afterEach(() => {
    vi.useRealTimers();
  });

  it('session-append creates the session once, appends in order past the cap, and sets, clears or leaves the mode', async () => {
    const session = randomUUID();
    const k = sessionKeys(prefix, session);
    await capped.appendTranscript(session, line('a'), line('b'));
    const createdAt = await redis.hget(k.meta, 'createdAt');
    expect(createdAt).toMatch(/^\d+$/);
    expect(await listed(session)).not.toBeNull();
    // The mode: set with its command line, left by a plain append, cleared with one.
    await capped.setMode(session, 'collect', line('c'));
    expect(await capped.mode(session)).toBe('collect');
    await capped.appendTranscript(session, line('d'));
    expect(await capped.mode(session)).toBe('collect');
    await capped.setMode(session, null, line('e'));
    expect(await capped.mode(session)).toBeNull();
    // Five lines under a cap of three: the oldest two dropped, the numbers kept.
    expect(await texts(session)).toEqual(['c', 'd', 'e']);
    expect(await redis.hget(k.meta, 'trimmed')).toBe('2');
    expect(await capped.transcriptPage(session, 0, 100)).toMatchObject({ first: 2, length: 5 });
    // Created once: later appends leave createdAt; every write gives the keys the idle TTL.
    expect(await redis.hget(k.meta, 'createdAt')).toBe(createdAt);
    for (const ttl of [await redis.pttl(k.meta), await redis.pttl(k.transcript)]) {
      expect(ttl).toBeGreaterThan(IDLE_MS - 10_000);
      expect(ttl).toBeLessThanOrEqual(IDLE_MS);
    }
  });

  it('session-reply appends a reply once per id within the window, and again once the window has passed', async () => {
    const session = randomUUID();
    const k = sessionKeys(prefix, session);
    const WINDOW = 600_000;
    // A reply may be the session's first write: it creates the session.
    expect(await capped.appendOnce(session, 'reply:r1', WINDOW, line('r1'))).toBe(true);
    expect(await redis.hget(k.meta, 'createdAt')).toMatch(/^\d+$/);
    expect(await capped.appendOnce(session, 'reply:r1', WINDOW, line('r1 again'))).toBe(false);
    expect(await capped.appendOnce(session, 'reply:r2', WINDOW, line('r2'), line('r2 tools'))).toBe(true);
    expect(await texts(session)).toEqual(['r1', 'r2', 'r2 tools']);
    expect(await capped.seen(session, 'reply:r1', WINDOW)).toBe(true);
    // The ids live the window.
    const seenTtl = await redis.pttl(k.seen);
    expect(seenTtl).toBeGreaterThan(WINDOW - 10_000);
    expect(seenTtl).toBeLessThanOrEqual(WINDOW);
    // Past the window (this process's clock moved, which gives the script its now) r1 is new again.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + WINDOW + 1 });
    expect(await capped.appendOnce(session, 'reply:r1', WINDOW, line('r1 later'))).toBe(true);
    expect(await texts(session)).toEqual(['r2', 'r2 tools', 'r1 later']);
  });

  it('session-reply keeps as many ids as transcript lines, the newest', async () => {
    const session = randomUUID();
    for (const id of ['a', 'b', 'c', 'd'])
      expect(await capped.appendOnce(session, id, 600_000, line(id))).toBe(true);
    // A cap of three: a, the oldest id, is forgotten, and its reply would be written again.
    expect(await redis.zrange(sessionKeys(prefix, session).seen, '0', '-1')).toEqual(['b', 'c', 'd']);
    expect(await capped.appendOnce(session, 'd', 600_000, line('d again'))).toBe(false);
    expect(await capped.appendOnce(session, 'a', 600_000, line('a again'))).toBe(true);
  });

  it('session-transcript pages by line number, clamped to the lines kept, and writes nothing', async () => {
    const session = randomUUID();
    await capped.appendTranscript(session, ...['m0', 'm1', 'm2', 'm3', 'm4'].map(line));
    const page = (from: number, limit: number) => capped.transcriptPage(session, from, limit);
    expect(await page(3, 1)).toEqual({ first: 2, length: 5, from: 3, lines: [line('m3')] });
    // Before the oldest kept: from it; past the end: the end, no lines.
    expect(await page(0, 2)).toEqual({ first: 2, length: 5, from: 2, lines: [line('m2'), line('m3')] });
    expect(await page(99, 2)).toEqual({ first: 2, length: 5, from: 5, lines: [] });
    // A read keeps nothing alive: the TTLs lowered stay lowered, the session is not listed again.
    for (const key of sessionKeyList(sessionKeys(prefix, session))) await redis.pexpire(key, 5000);
    await redis.zrem(tenantSessionsKey(prefix, 'default'), session);
    await page(0, 10);
    for (const ttl of await pttls(session)) expect(ttl).toBeLessThanOrEqual(5000);
    expect(await listed(session)).toBeNull();
    // An unknown session reads empty and is not created.
    const unknown = randomUUID();
    expect(await capped.transcriptPage(unknown, 0, 10)).toEqual({ first: 0, length: 0, from: 0, lines: [] });
    expect(await redis.exists(...sessionKeyList(sessionKeys(prefix, unknown)))).toBe(0);
  });
});
