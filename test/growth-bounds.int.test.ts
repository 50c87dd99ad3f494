/**
 * Redis stays bounded, seen from outside: the transcript export paged by line number (past the cap), a resumed
 * event stream told that trimmed events are gone, a lane sweep that one poisoned session does not
 * stop, and source statuses that expire. The API runs alone; the services the sense and plan pools
 * run are built here over the same Redis and prefix, and called directly.
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseApiEnv } from '@tetraloop/api';
import { DEFAULT_TENANT, scopedName } from '@tetraloop/core/domain';
import { createLogger } from '@tetraloop/core/logging';
import { closeQueues, openQueues, type LoopQueues } from '@tetraloop/core/queues';
import { buildServices, type Services } from '@tetraloop/core/runtime';
import { busySessionsKey, sessionKeys, sourcesKey } from '@tetraloop/core/state';
import { builtinTools, parseAllowHosts } from '@tetraloop/core/tools';
import { startStack, type Stack } from './support/stack.js';

let stack: Stack;
let redis: Redis;
let queues: LoopQueues;
let services: Services;
const logs: { level: number; msg: string; sessionKey?: string }[] = [];
const T = '2026-11-30T00:00:00.000Z';

beforeAll(async () => {
  stack = await startStack({
    pools: [],
    env: { TETRALOOP_TRANSCRIPT_MAX_LINES: '100', TETRALOOP_RUN_EVENTS_MAX: '100' },
  });
  redis = new Redis(inject('redisUrl'));
  queues = openQueues(redis, stack.prefix, createLogger({ level: 'silent', layer: 'sense' }));
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs.push(JSON.parse(chunk.toString()) as (typeof logs)[number]);
      done();
    },
  });
  services = buildServices(
    parseApiEnv(stack.env),
    redis,
    queues,
    builtinTools({ egress: parseAllowHosts('') }),
    undefined,
    createLogger({ level: 'error', layer: 'sense' }, sink),
  );
});

afterAll(async () => {
  await stack.close();
  await closeQueues(queues);
  await redis.quit();
});

const stored = (key: string): string => scopedName(DEFAULT_TENANT, key);
type Line = Record<string, unknown>;
async function transcript(key: string, query = ''): Promise<{ status: number; lines: Line[] }> {
  const res = await fetch(`${stack.url}/v1/sessions/${key}/transcript${query}`);
  const text = await res.text();
  if (res.status !== 200) return { status: res.status, lines: [JSON.parse(text) as Line] };
  return {
    status: res.status,
    lines: text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Line),
  };
}

describe('the transcript export', () => {
  it('pages lines by number with after and limit, past the cap', async () => {
    const key = `paged-${Date.now()}`;
    for (let i = 0; i < 130; i++) {
      await services.sessionStore.appendTranscript(stored(key), {
        type: 'message',
        role: 'user',
        text: `m${i}`,
      });
    }
    // 100 lines kept: numbers 30..129.
    const first = await transcript(key, '?limit=40');
    expect(first.status).toBe(200);
    expect(first.lines[0]).toMatchObject({
      type: 'session',
      id: key,
      first: 30,
      from: 30,
      length: 130,
      next: 69,
    });
    expect(first.lines.slice(1).map((l) => l.text)).toEqual(
      Array.from({ length: 40 }, (_, i) => `m${30 + i}`),
    );
    const second = await transcript(key, '?after=69&limit=40');
    expect(second.lines[0]).toMatchObject({ from: 70, next: 109 });
    expect(second.lines[1]).toMatchObject({ text: 'm70' });
    const last = await transcript(key, '?after=109&limit=40');
    expect(last.lines[0]).toMatchObject({ from: 110, next: null });
    expect(last.lines).toHaveLength(21);
    // Asking after a trimmed line starts at the oldest kept; past the end gives the header alone.
    expect((await transcript(key, '?after=3&limit=1')).lines[1]).toMatchObject({ text: 'm30' });
    const past = await transcript(key, '?after=500');
    expect(past.lines).toHaveLength(1);
    expect(past.lines[0]).toMatchObject({ from: 130, length: 130, next: null });
    // Without paging parameters: the first 1000 kept lines.
    expect((await transcript(key)).lines).toHaveLength(101);
    for (const bad of ['?limit=0', '?limit=10001', '?after=-1', '?after=x', '?from=3']) {
      const res = await transcript(key, bad);
      expect(res.status, bad).toBe(400);
    }
  });
});

describe('the event stream', () => {
  it('says events.truncated when a resumed client asks for events trimmed from the stream', async () => {
    const { store } = services;
    const runId = crypto.randomUUID();
    await store.create({
      runId,
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'echo', args: {} }], edges: [] },
      plan: { nodes: [{ id: 'a', kind: 'tool', tool: 'echo', args: {} }], edges: [] },
      input: null,
      metadata: undefined,
      timeoutSeconds: 30,
      budget: { toolCalls: 10 },
      createdAt: T,
      pending: new Map([['a', 0]]),
    });
    for (let i = 0; i < 500; i++) await store.appendEvent(runId, 'assistant.delta', 'a', { text: `${i}` });
    const error = { code: 'cancelled' as const, message: 'done' };
    await store.decide(runId, 'cancelled', error, T);
    const fill = new Map([
      ['a', { status: 'cancelled' as const, attempts: [], finishedAt: T, durationMs: 0 }],
    ]);
    await store.settle(runId, 0, fill, null, { status: 'cancelled', error, generation: 0 }, T);
    const oldest = (await store.events(runId, 0, 1))[0]!.seq;
    expect(oldest).toBeGreaterThan(6);
    const res = await fetch(`${stack.url}/v1/runs/${runId}/events`, { headers: { 'last-event-id': '5' } });
    const blocks = (await res.text()).split('\n\n').filter((b) => b.trim() !== '');
    // First the gap, without an id, then the oldest event kept, then on to run.finished.
    expect(blocks[0]).toBe(
      `event: lifecycle\ndata: ${JSON.stringify({
        type: 'events.truncated',
        family: 'lifecycle',
        phase: 'update',
        runId,
        data: { after: 5, next: oldest },
      })}`,
    );
    expect(blocks[1]).toMatch(new RegExp(`^id: ${oldest}\n`));
    expect(blocks.at(-1)).toContain('"type":"run.finished"');
    expect(blocks.filter((b) => b.includes('events.truncated'))).toHaveLength(1);
    // A client that kept up sees no gap.
    const caughtUp = await fetch(`${stack.url}/v1/runs/${runId}/events`, {
      headers: { 'last-event-id': String(oldest) },
    });
    expect(await caughtUp.text()).not.toContain('events.truncated');
  });
});

describe('the lane sweep', () => {
  it('frees a poisoned session, logs it and writes it in its transcript, and moves the other lanes', async () => {
    const { sessionStore } = services;
    const admit = (session: string, runId: string): ReturnType<typeof sessionStore.admit> =>
      sessionStore.admit(session, {
        mode: 'followup',
        runId,
        message: { text: 'x', receivedAt: T },
        collectCap: 5,
        drop: 'old',
        envCap: 5,
        followupCap: 100,
      });
    const healthy: string[] = [];
    const poisoned: string[] = [];
    for (let i = 0; i < 3; i++) {
      // A lane held by a run that is gone: the sweep frees it.
      const ok = stored(`ok-${i}-${Date.now()}`);
      await admit(ok, `gone-${i}`);
      healthy.push(ok);
      // A lane waiting on collected messages whose debounce time is garbage: its advance fails.
      const bad = stored(`bad-${i}-${Date.now()}`);
      await admit(bad, `gone-bad-${i}`);
      const k = sessionKeys(stack.prefix, bad);
      await redis.hset(k.meta, 'running', 'collect', 'lastCollectAt', 'garbage');
      await redis.rpush(k.queue, 'collect', 'queued-run');
      poisoned.push(bad);
    }
    // A session whose hash is not a hash at all: not even /stop can read it.
    const broken = stored(`broken-${Date.now()}`);
    await redis.set(sessionKeys(stack.prefix, broken).meta, 'garbage');
    await redis.sadd(busySessionsKey(stack.prefix), broken);

    expect(await services.sessions.sweep()).toBe(4);

    for (const session of healthy) expect(await sessionStore.running(session)).toBeNull();
    for (const session of poisoned) {
      expect(await sessionStore.running(session)).toBeNull();
      expect(await redis.llen(sessionKeys(stack.prefix, session).queue)).toBe(0);
      const { lines } = await sessionStore.transcriptPage(session, 0, 10);
      expect(lines.at(-1)).toMatchObject({ type: 'error', code: 'lane_failed', cancelled: ['queued-run'] });
    }
    const busy = await redis.smembers(busySessionsKey(stack.prefix));
    for (const session of [...healthy, ...poisoned, broken]) expect(busy).not.toContain(session);
    const failures = logs.filter((l) => l.msg === 'session lane could not move on; freeing it');
    expect(failures.map((l) => l.sessionKey).sort()).toEqual([...poisoned, broken].sort());
    // Nothing is left to fail on the next pass.
    expect(await services.sessions.sweep()).toBe(0);
  });

  it('checks the environment of the other sessions when one cannot be read', async () => {
    const broken = stored(`broken-env-${Date.now()}`);
    await redis.set(sessionKeys(stack.prefix, broken).meta, 'garbage');
    await redis.sadd(busySessionsKey(stack.prefix), broken);
    const before = logs.length;
    expect(await services.sessions.checkEnvironment()).toBe(0);
    expect(logs.slice(before)).toEqual([
      expect.objectContaining({ msg: 'session environment check failed', sessionKey: broken }),
    ]);
    await redis.srem(busySessionsKey(stack.prefix), broken);
  });
});

describe('source statuses', () => {
  it('carry a TTL refreshed by each event, and leave the list once expired', async () => {
    const { sources } = services;
    await sources.register('polled-a', 'poll', 'default');
    await sources.ingest('polled-a', { type: 'tick', eventId: 'e1', payload: 1 }, 'poll');
    const key = `${sourcesKey(stack.prefix)}:polled-a`;
    const ttl = await redis.ttl(key);
    expect(ttl).toBeGreaterThan(30 * 86_400 - 60);
    expect((await sources.statuses('default')).map((s) => s.name)).toContain('polled-a');
    await redis.del(key);
    expect((await sources.statuses('default')).map((s) => s.name)).not.toContain('polled-a');
    expect(await redis.sismember(sourcesKey(stack.prefix), 'polled-a')).toBe(0);
  });
});
