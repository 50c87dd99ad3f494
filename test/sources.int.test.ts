/**
 * Timer, file and HTTP sources on a real Redis with the real sense pool: a timer puts one event per
 * interval into its session's environment, not doubled by a second sense process; a file source
 * takes a new or changed file of its directory once, a big one as metadata only; a source whose
 * directory is missing reports its error; a polled answer naming a session key outside the API's
 * alphabet (another tenant's session) is dropped and counted; `GET /v1/sources` shows each
 * tenant its own sources; a bad entry is refused at start naming the field.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scopedName } from '@tetraloop/core/domain';
import {
  FILE_CONTENT_MAX_BYTES,
  globToRegExp,
  type FilePayload,
  type SenseEvent,
} from '@tetraloop/core/sessions';
import { SessionStore } from '@tetraloop/core/state';
import { parseApiEnv, startApi } from '@tetraloop/api';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';
import { followJobEvents, startStack, testEnv, type JobEvents, type Stack } from './support/stack.js';
import { metricValue } from './support/inspect.js';

let stack: Stack;
let redis: Redis;
let sessions: SessionStore;
let dir: string;
let second: PoolsHandle | undefined;
/** A polled source's remote end: its answer names sessions of other tenants, and one of its own. */
let remote: Server;
const POLLED_ANSWER = [
  { eventId: 'p-victim', sessionKey: 'acme~polled-victim', payload: { injected: true } },
  { eventId: 'p-odd', sessionKey: 'Zz~a}b{c d', payload: { injected: true } },
  { eventId: 'p-own', sessionKey: 'polled-own', payload: { fine: true } },
];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tetraloop-inbox-'));
  remote = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(POLLED_ANSWER));
  });
  await new Promise<void>((resolve) => remote.listen(0, '127.0.0.1', resolve));
  const { port } = remote.address() as AddressInfo;
  stack = await startStack({
    pools: ['sense'],
    env: {
      TETRALOOP_BURST_WINDOW_MS: '0',
      TETRALOOP_SOURCES: JSON.stringify([
        { kind: 'timer', name: 'beat', intervalMs: 1000, sessionKey: 'beat', type: 'heartbeat' },
        { kind: 'timer', name: 'acme-beat', tenant: 'acme', intervalMs: 1000, sessionKey: 'beat' },
        { kind: 'file', name: 'inbox', dir, intervalMs: 1000, sessionKey: 'inbox', pattern: '*.txt' },
        { kind: 'file', name: 'nowhere', dir: join(dir, 'missing'), intervalMs: 1000, sessionKey: 'inbox' },
        { name: 'polled', url: `http://127.0.0.1:${port}/events`, intervalMs: 1000 },
        // Nothing listens on port 1: each poll fails, and the error is acme's to see.
        { name: 'acme-poll', tenant: 'acme', url: 'http://127.0.0.1:1/', intervalMs: 1000 },
      ]),
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
  sessions = new SessionStore(redis, stack.prefix);
});
afterAll(async () => {
  await second?.close();
  await stack?.close();
  redis?.disconnect();
  await rm(dir, { recursive: true, force: true });
  await new Promise<void>((resolve) => (remote ? remote.close(() => resolve()) : resolve()));
});

/** The events of one source in a session's environment, oldest first. */
const eventsOf = async (sessionKey: string, source: string): Promise<SenseEvent[]> =>
  ((await sessions.environment(sessionKey)).events as SenseEvent[]).filter((e) => e.source === source);
/** The next completed run of a configured source (its scheduler's job ids are `repeat:poll:<name>:<ms>`). */
const ran = (events: JobEvents, name: string) =>
  events.next(
    (e) => e.event === 'completed' && e.jobId.includes(`poll:${name}:`),
    Date.now() + 20_000,
    `a run of source ${name}`,
  );

describe('timer sources', () => {
  it('put one event per interval into the environment, also with two sense processes', async () => {
    const sense = await followJobEvents(stack, ['sense']);
    try {
      for (let i = 0; i < 3; i++) await ran(sense, 'beat');
      second = await startPools(parseWorkerEnv(stack.env), { pools: ['sense'] });
      for (let i = 0; i < 4; i++) await ran(sense, 'beat');
    } finally {
      sense.close();
    }
    const events = await eventsOf('beat', 'beat');
    expect(events.length).toBeGreaterThanOrEqual(7);
    const ticks = events.map((e) => Date.parse((e.payload as { at: string }).at));
    // Consecutive ticks one interval apart: none doubled, none lost, across both processes.
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(1000);
    expect(new Set(events.map((e) => e.eventId)).size).toBe(events.length);
    expect(events[0]).toMatchObject({ type: 'heartbeat', sessionKey: 'beat' });
    expect((await sessions.environment('beat')).version).toBe(events.length);
    // A source of another tenant writes into that tenant's session of the same name, not this one.
    expect(events.every((e) => e.source === 'beat')).toBe(true);
    const acme = (await sessions.environment(scopedName('acme', 'beat'))).events as SenseEvent[];
    expect(acme.length).toBeGreaterThan(0);
    expect(acme.every((e) => e.source === 'acme-beat' && e.tenant === 'acme')).toBe(true);
  });
});

describe('file sources', () => {
  /** Waits for runs of the inbox source until `done` holds of its events (or the deadline). */
  const until = async (sense: JobEvents, done: (events: SenseEvent[]) => boolean): Promise<SenseEvent[]> => {
    for (;;) {
      const events = await eventsOf('inbox', 'inbox');
      if (done(events)) return events;
      await ran(sense, 'inbox');
    }
  };
  const named = (events: SenseEvent[], name: string) =>
    events.filter((e) => (e.payload as FilePayload).name === name).map((e) => e.payload as FilePayload);

  it('take a new or changed file once, a big one as metadata only, and skip what the pattern does not match', async () => {
    const sense = await followJobEvents(stack, ['sense']);
    try {
      await writeFile(join(dir, 'a.txt'), 'hello');
      await writeFile(join(dir, 'skip.json'), '{}');
      await writeFile(join(dir, '.hidden.txt'), 'partial');
      await until(sense, (events) => named(events, 'a.txt').length === 1);
      // Two more passes over an unchanged directory take nothing.
      await ran(sense, 'inbox');
      await ran(sense, 'inbox');
      expect(named(await eventsOf('inbox', 'inbox'), 'a.txt')).toHaveLength(1);

      await writeFile(join(dir, 'a.txt'), 'hello again');
      await writeFile(join(dir, 'big.txt'), 'x'.repeat(FILE_CONTENT_MAX_BYTES + 1));
      await until(
        sense,
        (events) => named(events, 'a.txt').length === 2 && named(events, 'big.txt').length === 1,
      );
      await ran(sense, 'inbox');
      await ran(sense, 'inbox');
    } finally {
      sense.close();
    }
    const events = await eventsOf('inbox', 'inbox');
    expect(named(events, 'a.txt')).toMatchObject([
      { path: join(dir, 'a.txt'), size: 5, content: 'hello' },
      { size: 11, content: 'hello again' },
    ]);
    const [big] = named(events, 'big.txt');
    expect(big).toMatchObject({ size: FILE_CONTENT_MAX_BYTES + 1, contentOmitted: 'too_large' });
    expect(big).not.toHaveProperty('content');
    expect(events).toHaveLength(3);
    expect(events[0]).toMatchObject({ type: 'file', sessionKey: 'inbox' });
    expect(events[0]!.eventId).toMatch(/^file:[0-9a-f]{64}$/);

    const { sources } = (await fetch(`${stack.url}/v1/sources`).then((r) => r.json())) as {
      sources: { name: string; kind: string; status: string; events: number; lastError: string | null }[];
    };
    const of = (name: string) => sources.find((s) => s.name === name);
    expect(of('inbox')).toMatchObject({ kind: 'file', status: 'ok', events: 3, lastError: null });
    // Not doubled by the second sense process's scheduler either (a doubled tick would be a duplicate).
    expect(of('beat')).toMatchObject({ kind: 'timer', status: 'ok', duplicates: 0 });
    expect(['degraded', 'down']).toContain(of('nowhere')?.status);
    expect(of('nowhere')?.lastError).toMatch('ENOENT');
  });
});

/** Every Redis key under this stack's prefix that contains `part`. */
async function keysWith(part: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${stack.prefix}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys.filter((k) => k.includes(part)));
  } while (cursor !== '0');
  return found;
}

describe('polled sources', () => {
  it("never write into another tenant's session: an answer naming a key outside the alphabet is dropped and counted", async () => {
    const before = await metricValue(
      stack.url,
      'tetraloop_source_events_refused_total{reason="invalid_session_key"}',
    );
    const sense = await followJobEvents(stack, ['sense']);
    try {
      // The second of two polls that end from here on started after `before` was read.
      await ran(sense, 'polled');
      await ran(sense, 'polled');
    } finally {
      sense.close();
    }
    // The source's own session (of its tenant, the default one) got its event…
    expect(await eventsOf('polled-own', 'polled')).toEqual([
      expect.objectContaining({ eventId: 'p-own', payload: { fine: true } }),
    ]);
    // …acme's session got nothing, and no key was made under a tenant "Zz" nobody can delete.
    expect((await sessions.environment(scopedName('acme', 'polled-victim'))).events).toEqual([]);
    expect(await keysWith('polled-victim')).toEqual([]);
    expect(await keysWith('Zz~')).toEqual([]);
    // Both refusals of each poll are counted.
    expect(
      (await metricValue(stack.url, 'tetraloop_source_events_refused_total{reason="invalid_session_key"}')) -
        before,
    ).toBeGreaterThanOrEqual(2);
  });
});

describe('the source list', () => {
  it("shows each tenant its own sources with their errors, and no other tenant's", async () => {
    // A second API on the same Redis, with keys: the stack's own answers as the default tenant.
    const root = 'root-token-0123456789-0123456789-0123456789';
    const api = await startApi(
      parseApiEnv({ ...stack.env, TETRALOOP_AUTH: 'required', TETRALOOP_ADMIN_TOKEN: root }),
    );
    type Listed = { name: string; lastError: string | null }[];
    const listed = async (url: string, key?: string): Promise<Listed> => {
      const res = await fetch(
        `${url}/v1/sources`,
        key ? { headers: { authorization: `Bearer ${key}` } } : {},
      );
      expect(res.status).toBe(200);
      return ((await res.json()) as { sources: Listed }).sources;
    };
    try {
      const keyOf = async (tenant: string): Promise<string> => {
        const res = await fetch(`${api.url}/v1/keys`, {
          method: 'POST',
          headers: { authorization: `Bearer ${root}`, 'content-type': 'application/json' },
          body: JSON.stringify({ tenant, scopes: ['sessions:read'], name: 'sources' }),
        });
        expect(res.status).toBe(201);
        return ((await res.json()) as { key: string }).key;
      };
      const [acme, house, beta] = await Promise.all(['acme', 'default', 'beta'].map(keyOf));
      await expect
        .poll(async () => (await listed(api.url, acme)).find((s) => s.name === 'acme-poll')?.lastError, {
          timeout: 20_000,
          interval: 100,
        })
        .toBeTruthy();
      expect((await listed(api.url, acme)).map((s) => s.name)).toEqual(['acme-beat', 'acme-poll']);
      const ofDefault = (await listed(api.url, house)).map((s) => s.name);
      expect(ofDefault).toEqual(expect.arrayContaining(['beat', 'inbox', 'nowhere', 'polled']));
      expect(ofDefault.filter((name) => name.startsWith('acme-'))).toEqual([]);
      // Auth off is the default tenant: acme's sources are not there either.
      expect((await listed(stack.url)).map((s) => s.name)).toEqual(ofDefault);
      expect(await listed(api.url, beta)).toEqual([]);
    } finally {
      await api.close();
    }
  });
});

describe('configuration', () => {
  const refused = (sources: unknown[]) => () =>
    parseWorkerEnv(testEnv({ TETRALOOP_SOURCES: JSON.stringify(sources) }));

  it('refuses a bad source at start, naming the field', () => {
    expect(refused([{ kind: 'file', name: 'f', dir: 'inbox', sessionKey: 's' }])).toThrow(
      'TETRALOOP_SOURCES.0.dir: must be an absolute path',
    );
    expect(refused([{ kind: 'timer', name: 't', intervalMs: 500, sessionKey: 's' }])).toThrow(
      'TETRALOOP_SOURCES.0.intervalMs',
    );
    expect(refused([{ kind: 'timer', name: 't', intervalMs: 1000 }])).toThrow(
      'TETRALOOP_SOURCES.0.sessionKey',
    );
    expect(refused([{ kind: 'ws', name: 'w' }])).toThrow('TETRALOOP_SOURCES.0.kind');
    // A fixed session key is checked against the API's alphabet for every kind: no tenant's `~`.
    for (const source of [
      { name: 'h', url: 'https://example.com/', intervalMs: 200, sessionKey: 'acme~victim' },
      { kind: 'timer', name: 't', intervalMs: 1000, sessionKey: 'acme~victim' },
      { kind: 'file', name: 'f', dir: '/tmp', sessionKey: 'Zz~a}b{c d' },
      { kind: 'websocket', name: 'w', url: 'wss://example.com/', sessionKey: 'acme~victim' },
    ]) {
      expect(refused([source]), source.name).toThrow('TETRALOOP_SOURCES.0.sessionKey');
    }
    expect(
      refused([{ kind: 'timer', name: 't', intervalMs: 1000, sessionKey: 's', tenant: 'Acme' }]),
    ).toThrow('TETRALOOP_SOURCES.0.tenant');
    expect(
      refused([
        { kind: 'timer', name: 't', intervalMs: 1000, sessionKey: 's' },
        { name: 't', url: 'https://example.com/', intervalMs: 1000 },
      ]),
    ).toThrow('TETRALOOP_SOURCES.1.name: "t" is configured twice');
    // An entry without a kind is an HTTP poll, as before.
    const env = parseWorkerEnv(
      testEnv({
        TETRALOOP_SOURCES: JSON.stringify([{ name: 'h', url: 'https://example.com/', intervalMs: 200 }]),
      }),
    );
    expect(env.TETRALOOP_SOURCES).toEqual([
      {
        kind: 'http',
        name: 'h',
        tenant: 'default',
        url: 'https://example.com/',
        intervalMs: 200,
        timeoutMs: 5000,
        type: 'poll',
      },
    ]);
  });

  it('match file names by a glob of * and ?, everything else literal', () => {
    const glob = globToRegExp('order-?.json');
    expect(['order-1.json', 'order-a.json'].every((n) => glob.test(n))).toBe(true);
    expect(['order-12.json', 'order-1xjson', 'order-1.json.tmp'].some((n) => glob.test(n))).toBe(false);
    expect(globToRegExp('*.txt').test('a.b.txt')).toBe(true);
    expect(globToRegExp('*.txt').test('a.txt.gz')).toBe(false);
    expect(globToRegExp('a+(b)[c]').test('a+(b)[c]')).toBe(true);
  });
});
