/**
 * Event streams and waits at scale: every stream of an API process is fed by a few blocking
 * connections, resumes miss nothing and repeat nothing, and the caps on open streams and waits
 * answer 429 (a tenant's) or 503 (the process's) with Retry-After.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type RedisClient, connectRedis } from '@tetraloop/core/runtime';
import {
  openEvents,
  post,
  postRun,
  readEvents,
  startStack,
  untilEvent,
  type Stack,
  type StreamedEvent,
} from './support/stack.js';

let stack: Stack | undefined;
let redis: RedisClient | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
  redis?.disconnect();
  redis = undefined;
});

const ROOT = 'root-token-0123456789-0123456789-0123456789';

/** A run that waits for `go` (accepted before it waits), then ends with a json node. */
const gated = (signals: readonly string[] = ['go']) => {
  const nodes: Record<string, unknown>[] = signals.map((s) => ({
    id: `gate-${s}`,
    kind: 'wait',
    signal: s,
    timeoutSeconds: 120,
    acceptEarly: true,
  }));
  nodes.push({ id: 'after', kind: 'tool', tool: 'json', args: { value: 1 } });
  const ids = nodes.map((n) => n.id as string);
  return { graph: { nodes, edges: ids.slice(1).map((id, i) => [ids[i]!, id]) } };
};

async function submit(s: Stack, body: unknown, headers: Record<string, string> = {}): Promise<string> {
  const posted = await postRun(s.url, body, headers);
  expect(posted.status).toBe(202);
  return posted.body.runId as string;
}

/** The API's connections of one name (`CLIENT LIST`), in this process. */
async function connectionsNamed(name: string): Promise<number> {
  redis ??= connectRedis(stack!.env.REDIS_URL!, 'worker', 'tetraloop-test-client-list');
  const list = (await redis.client('LIST')) as string;
  return list.split('\n').filter((line) => line.split(' ').includes(`name=${name}`)).length;
}

/** Ids 1, 2, …, n without a gap or a repeat, ending with the run's run.finished. */
function expectComplete(events: readonly StreamedEvent[], runId: string, firstId = 1): void {
  expect(events.map((e) => e.id)).toEqual(events.map((_, i) => firstId + i));
  expect(events.every((e) => e.data.runId === runId)).toBe(true);
  expect(events.at(-1)?.data.type).toBe('run.finished');
}

describe('event streams', () => {
  it('serves 200 concurrent streams from the reader pool, each complete and in order', async () => {
    stack = await startStack({
      env: { TETRALOOP_MAX_STREAMS_PER_TENANT: '1000', TETRALOOP_EVENT_READERS: '2' },
    });
    const s = stack;
    const runIds = await Promise.all(Array.from({ length: 200 }, () => submit(s, gated())));
    // Headers in: the API follows each run for its stream from here on.
    const streams = await Promise.all(runIds.map((id) => openEvents(s.url, id)));
    expect(streams.every((st) => st.status === 200)).toBe(true);
    // One connection per reader, whatever the number of streams (it was one per stream).
    expect(await connectionsNamed(`tetraloop-api-events-${process.pid}`)).toBe(2);

    const sent = await Promise.all(runIds.map((id) => post(s.url, `/v1/runs/${id}/signals/go`, {})));
    expect(sent.every((r) => r.status === 202)).toBe(true);
    const streamed = await Promise.all(streams.map((st) => st.events));
    for (const [i, events] of streamed.entries()) {
      expectComplete(events, runIds[i]!);
      expect(events.some((e) => e.data.type === 'signal.received')).toBe(true);
    }
    // What each stream saw live is what the run's stream holds.
    const stored = await Promise.all(runIds.slice(0, 20).map((id) => readEvents(s.url, id)));
    for (const [i, events] of stored.entries()) expect(streamed[i]).toEqual(events);
  }, 120_000);

  it('reads its runs in turns when they are more than one read may name', async () => {
    stack = await startStack({ env: { TETRALOOP_EVENT_READERS: '1', TETRALOOP_EVENT_READ_KEYS: '8' } });
    const s = stack;
    const runIds = await Promise.all(Array.from({ length: 40 }, () => submit(s, gated())));
    const streams = await Promise.all(runIds.map((id) => openEvents(s.url, id)));
    expect(await connectionsNamed(`tetraloop-api-events-${process.pid}`)).toBe(1);
    await Promise.all(runIds.map((id) => post(s.url, `/v1/runs/${id}/signals/go`, {})));
    for (const [i, st] of streams.entries()) expectComplete(await st.events, runIds[i]!);
  }, 60_000);

  it('cuts open streams when the API shuts down, within its grace period', async () => {
    stack = await startStack({ env: { TETRALOOP_SHUTDOWN_GRACE_MS: '200' } });
    const runId = await submit(stack, gated());
    const open = await openEvents(stack.url, runId);
    const closing = stack.close();
    stack = undefined;
    // The run never ends: only the shutdown ends the stream.
    const ended = await open.events.then(
      () => 'ended',
      () => 'cut',
    );
    expect(['ended', 'cut']).toContain(ended);
    await closing;
  });

  it('resumes after Last-Event-ID with no gap and no repeat while other streams of the run stay open', async () => {
    stack = await startStack();
    const runId = await submit(stack, gated(['first', 'second']));
    const whole = await openEvents(stack.url, runId);
    // A client that stopped right after the first gate began waiting.
    const cut = await untilEvent(
      stack.url,
      runId,
      (e) => e.data.type === 'signal.awaited' && e.data.nodeId === 'gate-first',
      { what: 'the first gate waiting' },
    );
    expect((await post(stack.url, `/v1/runs/${runId}/signals/first`, {})).status).toBe(202);
    const resumed = await openEvents(stack.url, runId, { lastEventId: cut.id });
    expect((await post(stack.url, `/v1/runs/${runId}/signals/second`, {})).status).toBe(202);

    const all = await whole.events;
    expectComplete(all, runId);
    const rest = await resumed.events;
    expectComplete(rest, runId, cut.id + 1);
    expect(rest).toEqual(all.slice(cut.id));
    expect(await readEvents(stack.url, runId, all.at(-1)!.id)).toEqual([]);
  });
});

describe('caps on streams and waits', () => {
  const as = (tenant: string) => ({ authorization: `Bearer ${ROOT}`, 'x-tetraloop-tenant': tenant });

  it('refuses a tenant past its streams with 429 and the process past its own with 503; an ended stream frees its slot', async () => {
    stack = await startStack({
      env: {
        TETRALOOP_AUTH: 'required',
        TETRALOOP_ADMIN_TOKEN: ROOT,
        TETRALOOP_MAX_STREAMS: '3',
        TETRALOOP_MAX_STREAMS_PER_TENANT: '2',
      },
    });
    const s = stack;
    const runA = await submit(s, gated(), as('acme'));
    const runB = await submit(s, gated(), as('beta'));
    const a1 = await openEvents(s.url, runA, { headers: as('acme') });
    const a2 = await openEvents(s.url, runA, { headers: as('acme') });
    expect([a1.status, a2.status]).toEqual([200, 200]);

    const a3 = await fetch(`${s.url}/v1/runs/${runA}/events`, { headers: as('acme') });
    expect(a3.status).toBe(429);
    expect(a3.headers.get('retry-after')).toBe('5');
    expect(await a3.json()).toMatchObject({ error: { code: 'too_many_streams' } });

    const b1 = await openEvents(s.url, runB, { headers: as('beta') });
    expect(b1.status).toBe(200);
    const b2 = await fetch(`${s.url}/v1/runs/${runB}/events`, { headers: as('beta') });
    expect(b2.status).toBe(503);
    expect(b2.headers.get('retry-after')).toBe('5');
    expect(await b2.json()).toMatchObject({ error: { code: 'streams_at_capacity' } });

    // acme's run ends: its two streams close, and their slots are free before their last byte.
    const go = await fetch(`${s.url}/v1/runs/${runA}/signals/go`, { method: 'POST', headers: as('acme') });
    expect(go.status).toBe(202);
    expectComplete(await a1.events, runA);
    expectComplete(await a2.events, runA);
    const b3 = await openEvents(s.url, runB, { headers: as('beta') });
    expect(b3.status).toBe(200);
    b1.close();
    b3.close();
  });

  it('refuses waits past the tenant cap with 429 and past the process cap with 503', async () => {
    stack = await startStack({
      env: {
        TETRALOOP_AUTH: 'required',
        TETRALOOP_ADMIN_TOKEN: ROOT,
        TETRALOOP_MAX_WAITS: '1',
        TETRALOOP_MAX_WAITS_PER_TENANT: '1',
      },
    });
    const s = stack;
    const wait = (runId: string, tenant: string) =>
      fetch(`${s.url}/v1/runs/${runId}/wait?timeoutMs=60000`, { headers: as(tenant) });
    const signal = (runId: string, tenant: string) =>
      fetch(`${s.url}/v1/runs/${runId}/signals/go`, { method: 'POST', headers: as(tenant) });

    // Two waits of one tenant: one holds the slot until the run settles, the other is refused at once.
    const run1 = await submit(s, gated(), as('acme'));
    const first = [wait(run1, 'acme'), wait(run1, 'acme')];
    const refused = await Promise.race(first);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toMatchObject({ error: { code: 'too_many_waits' } });
    expect((await signal(run1, 'acme')).status).toBe(202);
    const statuses = (await Promise.all(first)).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 429]);

    // Two tenants, one slot in the process: the second is refused with 503.
    const run2 = await submit(s, gated(), as('acme'));
    const run3 = await submit(s, gated(), as('beta'));
    const second = [wait(run2, 'acme'), wait(run3, 'beta')];
    const full = await Promise.race(second);
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('5');
    expect(await full.json()).toMatchObject({ error: { code: 'waits_at_capacity' } });
    await Promise.all([signal(run2, 'acme'), signal(run3, 'beta')]);
    expect((await Promise.all(second)).map((r) => r.status).sort()).toEqual([200, 503]);

    // A wait on a settled run holds no slot; the freed slot takes the next wait.
    expect((await wait(run1, 'acme')).status).toBe(200);
    const run4 = await submit(s, gated(), as('beta'));
    const quick = await fetch(`${s.url}/v1/runs/${run4}/wait?timeoutMs=0`, { headers: as('beta') });
    expect(quick.status).toBe(202);
  });
});
