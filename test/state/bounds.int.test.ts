/**
 * What keeps Redis from growing under `noeviction`, store by store against a real Redis: sessions'
 * idle TTL (set and refreshed by every write) and transcript cap (line numbers kept), memory's idle
 * TTL and the agents set pruned, a run's event stream capped and keys a script creates given the
 * run's TTL, and the bounded cache of compiled JSON schemas.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { RunSummary } from '@tetraloop/core/memory';
import { SCHEMA_CACHE_MAX, compileSchema, schemaCacheSize, setSchemaCacheMax } from '@tetraloop/core/model';
import type { ExecutableGraph, Graph, ToolNode } from '@tetraloop/core/nodes';
import {
  MemoryStore,
  RunStore,
  SessionStore,
  busySessionsKey,
  memoryAgentsKey,
  memoryKeyList,
  memoryKeys,
  runKeys,
  sessionKeyList,
  sessionKeys,
} from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const IDLE = 1000;
const sessions = new SessionStore(redis, prefix, { idleTtlSeconds: IDLE, transcriptMaxLines: 5 });
const T = '2026-11-30T00:00:00.000Z';

afterAll(async () => {
  await redis.quit();
});

const pttls = (keys: string[]): Promise<number[]> => Promise.all(keys.map((k) => redis.pttl(k)));
/** Every one of the TTLs is within the idle TTL and near it (set by the write just made). */
const fresh = (ttls: number[], seconds = IDLE): void => {
  for (const ttl of ttls) {
    expect(ttl).toBeGreaterThan((seconds - 60) * 1000);
    expect(ttl).toBeLessThanOrEqual(seconds * 1000);
  }
};

describe('sessions: idle TTL', () => {
  it('gives every key of the session the idle TTL on each write, and refreshes it', async () => {
    const session = randomUUID();
    const keys = sessionKeyList(sessionKeys(prefix, session));
    const [meta, queue, buffer, transcript, env] = keys as [string, string, string, string, string];
    await sessions.appendTranscript(session, { type: 'message', role: 'user', text: 'hi' });
    fresh(await pttls([meta, transcript]));
    // The lane: held by r1, r2 queued, two collected messages, an environment event.
    const message = { text: 'x', receivedAt: T };
    const lane = { message, collectCap: 5, drop: 'old' as const, envCap: 5, followupCap: 100 };
    await sessions.admit(session, { ...lane, mode: 'followup', runId: 'r1' });
    await sessions.admit(session, { ...lane, mode: 'followup', runId: 'r2' });
    await sessions.admit(session, { ...lane, mode: 'collect', runId: 'c' });
    await sessions.addEnvironmentEvent(session, { type: 'e' }, 5);
    fresh(await pttls(keys));
    // Time passes (the TTLs are lowered); any write gives all of them the whole idle TTL again.
    for (const key of keys) await redis.pexpire(key, 5000);
    await sessions.advance(session, 'r1', 0);
    fresh(await pttls(keys));
    for (const key of keys) await redis.pexpire(key, 5000);
    await sessions.setMode(session, 'steer', { type: 'command', command: 'queue' });
    fresh(await pttls([meta, queue, buffer, transcript, env]));
    for (const key of keys) await redis.pexpire(key, 5000);
    await sessions.history(session);
    fresh(await pttls(keys));
    for (const key of keys) await redis.pexpire(key, 5000);
    await sessions.bootstrap(session, () => Promise.resolve([{ name: 'SOUL.md', content: 's' }]));
    fresh(await pttls(keys));
    // A read does not keep the session alive.
    for (const key of keys) await redis.pexpire(key, 5000);
    await sessions.transcriptPage(session, 0, 10);
    for (const ttl of await pttls(keys)) expect(ttl).toBeLessThanOrEqual(5000);
  });

  it('lets the sweep drop a busy session whose keys expired, without creating it again', async () => {
    const session = randomUUID();
    await sessions.admit(session, {
      mode: 'followup',
      runId: 'r1',
      message: { text: 'x', receivedAt: T },
      collectCap: 5,
      drop: 'old',
      envCap: 5,
      followupCap: 100,
    });
    expect(await redis.sismember(busySessionsKey(prefix), session)).toBe(1);
    // The idle TTL ran out.
    await redis.del(...sessionKeyList(sessionKeys(prefix, session)));
    expect(await sessions.running(session)).toBeNull();
    expect(await sessions.advance(session, '', 0)).toEqual({ kind: 'idle' });
    expect(await redis.sismember(busySessionsKey(prefix), session)).toBe(0);
    expect(await redis.exists(...sessionKeyList(sessionKeys(prefix, session)))).toBe(0);
  });
});

describe('sessions: transcript cap', () => {
  const line = (text: string): Record<string, string> => ({ type: 'message', role: 'user', text });

  it('keeps the newest lines, numbered as they were, and pages them by number', async () => {
    const session = randomUUID();
    const k = sessionKeys(prefix, session);
    for (let i = 0; i < 12; i++) await sessions.appendTranscript(session, line(`m${i}`));
    expect(await redis.llen(k.transcript)).toBe(5);
    expect(await redis.hget(k.meta, 'trimmed')).toBe('7');
    const page = await sessions.transcriptPage(session, 0, 3);
    expect(page).toMatchObject({ first: 7, length: 12, from: 7 });
    expect(page.lines).toEqual([line('m7'), line('m8'), line('m9')]);
    const next = await sessions.transcriptPage(session, 10, 3);
    expect(next).toMatchObject({ first: 7, length: 12, from: 10, lines: [line('m10'), line('m11')] });
    expect((await sessions.transcriptPage(session, 12, 3)).lines).toEqual([]);
    // The history a run sees reads the kept lines, by their numbers.
    const history = await sessions.history(session);
    expect(history).toMatchObject({ contextFrom: 0, start: 0, length: 12 });
    expect(history.messages.map((m) => [m.index, m.text])).toEqual([
      [7, 'm7'],
      [8, 'm8'],
      [9, 'm9'],
      [10, 'm10'],
      [11, 'm11'],
    ]);
  });

  it('takes thousands of lines in one append', async () => {
    const session = randomUUID();
    const k = sessionKeys(prefix, session);
    const lines = Array.from({ length: 2500 }, (_, i) => line(`m${i}`));
    await sessions.appendTranscript(session, ...lines);
    expect(await redis.llen(k.transcript)).toBe(5);
    expect(await redis.hget(k.meta, 'trimmed')).toBe('2495');
    expect((await sessions.transcriptPage(session, 0, 10)).lines).toEqual(lines.slice(-5));
  });

  it('numbers contexts and compactions past the cap', async () => {
    const session = randomUUID();
    const k = sessionKeys(prefix, session);
    for (let i = 0; i < 6; i++) await sessions.appendTranscript(session, line(`m${i}`));
    // Line 6 is the /new; the context starts at 7.
    await sessions.reset(session, { type: 'command', command: 'new' });
    expect(await redis.hget(k.meta, 'contextFrom')).toBe('7');
    for (let i = 7; i < 10; i++) await sessions.appendTranscript(session, line(`m${i}`));
    const read = await sessions.history(session);
    expect(read).toMatchObject({ contextFrom: 7, start: 7, length: 10 });
    expect(read.messages.map((m) => m.index)).toEqual([7, 8, 9]);
    const record = { summary: 's', covers: { fromIndex: 7, toIndex: 8, messages: 2 } };
    expect(await sessions.compact(session, read, record, { type: 'compaction' })).toBe(true);
    expect(await redis.llen(k.transcript)).toBe(5);
    expect(await redis.hget(k.meta, 'trimmed')).toBe('6');
    const after = await sessions.history(session);
    expect(after).toMatchObject({ contextFrom: 7, start: 9, length: 11 });
    expect(after.messages.map((m) => [m.index, m.text])).toEqual([[9, 'm9']]);
  });
});

describe('memory: idle TTL', () => {
  const memory = new MemoryStore(redis, { prefix, hotRuns: 3, useBonus: 0.05, idleTtlSeconds: IDLE });
  const summary = (agentId: string): RunSummary => ({
    runId: randomUUID(),
    agentId,
    fingerprint: 'graph:x',
    status: 'failed',
    finishedAt: T,
    durationMs: 5,
    tokens: 0,
    calls: [{ node: 'n', tool: 'http', target: 'h.test', ms: 40, outcome: 'server' }],
    lessons: [],
  });

  it('gives an agent’s memory the idle TTL on each write, and drops expired agents from the set', async () => {
    const agent = `a-${randomUUID()}`;
    const other = `a-${randomUUID()}`;
    const k = memoryKeys(prefix, agent);
    await memory.record(summary(agent));
    await memory.record(summary(other));
    fresh(await pttls([k.meta, k.runs, k.stats]));
    for (const key of memoryKeyList(k)) await redis.pexpire(key, 5000);
    await memory.saveReflection(agent, [], true, T);
    fresh(await pttls([k.meta, k.runs, k.stats]));
    for (const key of memoryKeyList(k)) await redis.pexpire(key, 5000);
    await memory.feedbackAgainst(agent, ['l1']);
    fresh(await pttls([k.meta, k.runs, k.stats]));
    expect(await memory.agents()).toEqual(expect.arrayContaining([agent, other]));
    // The agent's memory expired: listing drops it from the set; the other stays.
    await redis.del(...memoryKeyList(k));
    const listed = await memory.agents();
    expect(listed).not.toContain(agent);
    expect(listed).toContain(other);
    expect(await redis.sismember(memoryAgentsKey(prefix), agent)).toBe(0);
  });
});

describe('runs: event stream cap and TTLs', () => {
  const store = new RunStore(redis, { prefix, retentionSeconds: 60, eventsMax: 100 });
  const tool = (id: string): ToolNode => ({ id, kind: 'tool', tool: 'echo', args: {} });
  const graph: Graph = { nodes: [tool('a')], edges: [] };
  const plan: ExecutableGraph = { nodes: [tool('a')], edges: [] };

  it('keeps about eventsMax events of a run, the newest', async () => {
    const runId = randomUUID();
    await store.create({
      runId,
      graph,
      plan,
      input: null,
      metadata: undefined,
      timeoutSeconds: 30,
      budget: { toolCalls: 10 },
      createdAt: T,
      pending: new Map([['a', 0]]),
    });
    for (let i = 0; i < 1000; i++) await store.appendEvent(runId, 'assistant.delta', 'a', { text: `${i}` });
    const length = await redis.xlen(runKeys(prefix, runId).events);
    // Trimmed at every 64th event, by whole stream nodes (100 entries each): at least the cap, at
    // most the cap, one node and 63 more.
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThanOrEqual(100 + 100 + 63);
    const events = await store.events(runId, 0, 10_000);
    expect(events.at(-1)?.seq).toBe(1001);
    expect(events[0]!.seq).toBe(1001 - length + 1);
  });

  it('gives a key a script creates after create-run the run’s TTL', async () => {
    const runId = randomUUID();
    const k = runKeys(prefix, runId);
    // A task run has no readiness counters until it is planned.
    await store.create({
      runId,
      task: { task: 'do it', agentId: 'main', maxReplans: 0 },
      input: null,
      metadata: undefined,
      timeoutSeconds: 30,
      budget: { toolCalls: 10 },
      createdAt: T,
      pending: new Map(),
    });
    expect(await redis.exists(k.pending)).toBe(0);
    const planning = {
      plannerModel: 'p',
      promptVersion: 'v',
      toolCatalogVersion: 't',
      planVersion: 1,
      environmentVersion: 0,
    };
    const two: Graph = { nodes: [tool('a'), tool('b')], edges: [['a', 'b']] };
    const twoPlan: ExecutableGraph = { nodes: [tool('a'), tool('b')], edges: [['a', 'b']] };
    await store.setPlan(runId, { graph: two, plan: twoPlan, pending: new Map([['b', 1]]) }, planning, {});
    const [meta, pending] = await pttls([k.meta, k.pending]);
    expect(pending).toBeGreaterThan(0);
    expect(Math.abs(pending! - meta!)).toBeLessThan(1000);
  });
});

describe('compiled JSON schemas', () => {
  it('keeps at most the cap, least recently used dropped, from ajv too', () => {
    const schema = (i: number): Record<string, unknown> => ({
      $id: `urn:bounds:${i}`,
      type: 'object',
      properties: { [`p${i}`]: { type: 'integer' } },
    });
    try {
      setSchemaCacheMax(10);
      const first = compileSchema(schema(0));
      for (let i = 1; i < 50; i++) compileSchema(schema(i));
      expect(schemaCacheSize()).toBe(10);
      // Schema 0 was dropped from ajv too: the same $id compiles again, with other content.
      const again = compileSchema({ $id: 'urn:bounds:0', type: 'string' });
      expect(again('x')).toBe(true);
      expect(first({ p0: 1 })).toBe(true);
      // A refused schema takes no room.
      expect(() => compileSchema({ type: 'no-such-type' })).toThrow();
      expect(schemaCacheSize()).toBe(10);
      // Using a schema keeps it: 49 was used last, so it is still there after 9 others.
      const kept = compileSchema(schema(49));
      const dropped = compileSchema(schema(48));
      compileSchema(schema(49));
      for (let i = 100; i < 109; i++) compileSchema(schema(i));
      expect(compileSchema(schema(49))).toBe(kept);
      expect(compileSchema(schema(48))).not.toBe(dropped);
    } finally {
      setSchemaCacheMax(SCHEMA_CACHE_MAX);
    }
  });
});
