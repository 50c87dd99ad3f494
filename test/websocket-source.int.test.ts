/**
 * WebSocket sources on a real Redis with the real sense pool and a real WebSocket server on
 * loopback: messages become events in the session's environment (an envelope, a bare payload, plain
 * text); an envelope naming a session key outside the API's alphabet (another tenant's session) is
 * dropped and counted; however many sense processes run, one holds the connection; a dropped connection is made
 * again; a host the egress policy refuses is reported on the source's status and never reached.
 */
import { Redis } from 'ioredis';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import type { SenseEvent } from '@tetraloop/core/sessions';
import { SessionStore } from '@tetraloop/core/state';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';
import { followJobEvents, startStack, testEnv, type JobEvents, type Stack } from './support/stack.js';
import { metricValue } from './support/inspect.js';

let stack: Stack;
let redis: Redis;
let sessions: SessionStore;
let server: WebSocketServer;
let second: PoolsHandle | undefined;
/** Every connection the server took, in order. */
const connections: WebSocket[] = [];
/** The path each connection asked for. */
const paths: string[] = [];
const watchers = new Set<() => void>();

beforeAll(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  server.on('connection', (socket, req) => {
    connections.push(socket);
    paths.push(req.url ?? '');
    for (const w of watchers) w();
  });
  const { port } = server.address() as AddressInfo;
  stack = await startStack({
    pools: ['sense'],
    env: {
      TETRALOOP_BURST_WINDOW_MS: '0',
      TETRALOOP_SOURCES: JSON.stringify([
        {
          kind: 'websocket',
          name: 'feed',
          url: `ws://127.0.0.1:${port}/feed`,
          intervalMs: 1000,
          sessionKey: 'feed',
        },
        // `localhost` is not allowlisted (only 127.0.0.1 is): it resolves to a private address.
        {
          kind: 'websocket',
          name: 'blocked',
          url: `ws://localhost:${port}/`,
          intervalMs: 1000,
          sessionKey: 'feed',
        },
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
  for (const c of connections) c.terminate();
  await new Promise<void>((resolve) => server?.close(() => resolve()));
});

/** Resolves once the server has taken `count` connections. */
const connected = (count: number): Promise<WebSocket> =>
  new Promise((resolve) => {
    const check = (): void => {
      if (connections.length < count) return;
      watchers.delete(check);
      resolve(connections[count - 1]!);
    };
    watchers.add(check);
    check();
  });

const open = (): WebSocket[] => connections.filter((c) => c.readyState === WebSocket.OPEN);

/** The feed's events in the session's environment once there are `count`, oldest first. */
const feedEvents = async (count: number): Promise<SenseEvent[]> => {
  let events: SenseEvent[] = [];
  await expect
    .poll(
      async () => {
        events = ((await sessions.environment('feed')).events as SenseEvent[]).filter(
          (e) => e.source === 'feed',
        );
        return events.length;
      },
      { timeout: 20_000, interval: 50 },
    )
    .toBeGreaterThanOrEqual(count);
  return events;
};

/** The next `n` completed checks of the feed source (its scheduler's job ids are `repeat:poll:feed:<ms>`). */
const checks = async (events: JobEvents, n: number): Promise<void> => {
  for (let i = 0; i < n; i++) {
    await events.next(
      (e) => e.event === 'completed' && e.jobId.includes('poll:feed:'),
      Date.now() + 20_000,
      'a check of the feed source',
    );
  }
};

it('turns each message into an event of the session environment: an envelope, a payload, plain text', async () => {
  const socket = await connected(1);
  socket.send(JSON.stringify({ eventId: 'tick-1', type: 'price', payload: { symbol: 'ACME', price: 12.5 } }));
  socket.send(JSON.stringify({ symbol: 'ACME', price: 12.75 }));
  socket.send('market closed');
  const events = await feedEvents(3);
  expect(events.map((e) => [e.eventId, e.type, e.payload])).toEqual([
    ['tick-1', 'price', { symbol: 'ACME', price: 12.5 }],
    [expect.stringMatching(/^sha256:/), 'message', { symbol: 'ACME', price: 12.75 }],
    [expect.stringMatching(/^sha256:/), 'message', 'market closed'],
  ]);
  // The same event id again is a duplicate, not a fourth event.
  socket.send(JSON.stringify({ eventId: 'tick-1', type: 'price', payload: { symbol: 'ACME', price: 12.5 } }));
  await expect.poll(async () => (await statusOf('feed'))?.duplicates, { timeout: 20_000 }).toBe(1);
  expect(await feedEvents(3)).toHaveLength(3);
});

it("drops and counts a message naming a session key outside the API's alphabet: never another tenant's session", async () => {
  const before = await metricValue(
    stack.url,
    'tetraloop_source_events_refused_total{reason="invalid_session_key"}',
  );
  const socket = await connected(1);
  // The source is the default tenant's; `acme~victim` is how acme's session `victim` is stored.
  socket.send(JSON.stringify({ eventId: 'ws-victim', sessionKey: 'acme~victim', payload: { injected: 1 } }));
  socket.send(JSON.stringify({ eventId: 'ws-odd', sessionKey: 'Zz~a}b{c d', payload: { injected: 2 } }));
  await expect
    .poll(
      async () =>
        (await metricValue(
          stack.url,
          'tetraloop_source_events_refused_total{reason="invalid_session_key"}',
        )) - before,
      {
        timeout: 20_000,
        interval: 50,
      },
    )
    .toBe(2);
  expect((await sessions.environment('acme~victim')).events).toEqual([]);
  const keys = await redis.keys(`${stack.prefix}:*`);
  expect(keys.filter((k) => k.includes('victim') || k.includes('Zz~'))).toEqual([]);
  // Neither became a payload of the source's own session either.
  const ids = ((await sessions.environment('feed')).events as SenseEvent[]).map((e) => e.eventId);
  expect(ids).not.toContain('ws-victim');
  expect(ids).not.toContain('ws-odd');
});

it('holds one connection however many sense processes run, and connects again when it drops', async () => {
  second = await startPools(parseWorkerEnv(stack.env), { pools: ['sense'] });
  const sense = await followJobEvents(stack, ['sense']);
  try {
    // Checks run on both processes; the lease keeps the connection with its holder.
    await checks(sense, 4);
    expect(connections).toHaveLength(1);
    expect(open()).toHaveLength(1);

    // The server drops it: the holder gives its lease up and a later check connects again.
    connections[0]!.terminate();
    const again = await connected(2);
    await checks(sense, 3);
    expect(connections).toHaveLength(2);
    expect(open()).toEqual([again]);
    again.send(JSON.stringify({ eventId: 'after-reconnect', type: 'price', payload: { price: 13 } }));
    const events = await feedEvents(4);
    expect(events.at(-1)).toMatchObject({ eventId: 'after-reconnect', sessionKey: 'feed' });
  } finally {
    sense.close();
  }
  expect(await statusOf('feed')).toMatchObject({ kind: 'websocket', status: 'ok', lastError: null });
});

it('reports a host the egress policy refuses, without reaching it', async () => {
  await expect
    .poll(async () => (await statusOf('blocked'))?.status, { timeout: 20_000 })
    .toMatch(/^(degraded|down)$/);
  expect((await statusOf('blocked'))?.lastError).toMatch('egress to localhost is refused');
  // Every connection the server ever took was the feed's (its path), none the blocked source's.
  expect(new Set(paths)).toEqual(new Set(['/feed']));
});

it('refuses a bad WebSocket source at start, naming the field', () => {
  const refused = (source: unknown) => () =>
    parseWorkerEnv(testEnv({ TETRALOOP_SOURCES: JSON.stringify([source]) }));
  expect(refused({ kind: 'websocket', name: 'w', url: 'https://example.com/' })).toThrow(
    'TETRALOOP_SOURCES.0.url',
  );
  expect(refused({ kind: 'websocket', name: 'w', url: 'wss://example.com/', intervalMs: 100 })).toThrow(
    'TETRALOOP_SOURCES.0.intervalMs',
  );
});

async function statusOf(
  name: string,
): Promise<
  { kind: string; status: string; events: number; duplicates: number; lastError: string | null } | undefined
> {
  const { sources } = (await fetch(`${stack.url}/v1/sources`).then((r) => r.json())) as {
    sources: {
      name: string;
      kind: string;
      status: string;
      events: number;
      duplicates: number;
      lastError: string | null;
    }[];
  };
  return sources.find((s) => s.name === name);
}
