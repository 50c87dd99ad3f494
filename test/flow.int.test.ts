/**
 * Flow control end to end, on the real stack: limits set through `PUT /v1/limits`, calls to the
 * loopback tool server held back and released by the tool pool, two tenants with their own keys.
 * Every check is structural: recorded call intervals, counts and orders, never a wall-clock bound.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { openEvents, startStack, type Stack } from './support/stack.js';
import { maxOverlap, startToolServer, type Hit, type ToolServer } from './support/tool-server.js';

const ROOT = 'root-token-0123456789-0123456789-0123456789';
let stack: Stack;
let tools: ToolServer;
let host: string;
const keys: Record<string, string> = {};

async function call(
  method: string,
  path: string,
  key: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function setLimits(limits: unknown[]): Promise<void> {
  const put = await call('PUT', '/v1/limits', ROOT, { limits });
  expect(put.status).toBe(200);
  // Workers read limits set through the API within TETRALOOP_LIMITS_REFRESH_MS (100 ms here):
  // wait for the tool pool's gate to see this version before submitting.
  const gate = stack.pools!.flow;
  await expect
    .poll(async () => (await gate.limits()).limits, { timeout: 5000, interval: 50 })
    .toEqual(put.body.limits);
}

/** One run of one http node calling `/work` on the tool server; answers its run id. */
async function submit(
  tenant: string,
  node: string,
  options: { ms?: number; priority?: number; path?: string; retry?: Record<string, number> } = {},
): Promise<string> {
  const url = `${tools.url}${options.path ?? `/work?node=${node}&ms=${options.ms ?? 100}`}`;
  const posted = await call('POST', '/v1/runs', keys[tenant]!, {
    graph: {
      nodes: [
        {
          id: 'call',
          kind: 'tool',
          tool: 'http',
          args: { url },
          ...(options.retry ? { retry: options.retry } : {}),
        },
      ],
    },
    ...(options.priority !== undefined ? { priority: options.priority } : {}),
  });
  expect(posted.status).toBe(202);
  return posted.body.runId as string;
}

async function settled(tenant: string, runId: string): Promise<RunDocument> {
  const res = await call('GET', `/v1/runs/${runId}/wait?timeoutMs=60000`, keys[tenant]!);
  expect(res.status).toBe(200);
  return res.body as unknown as RunDocument;
}

const hitsOf = (prefix: string): Hit[] => tools.hits.filter((h) => h.node.startsWith(prefix));

beforeAll(async () => {
  tools = await startToolServer();
  host = new URL(tools.url).host;
  stack = await startStack({
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_LIMITS_REFRESH_MS: '100',
      // A held-back job asks again at least this often; being woken when granted is the fast path.
      TETRALOOP_FLOW_RECHECK_MS: '1000',
      TETRALOOP_RATE_LIMIT_PER_KEY: '100000',
      TETRALOOP_RATE_LIMIT_PER_TENANT: '100000',
    },
  });
  for (const tenant of ['big', 'small']) {
    const made = await call('POST', '/v1/keys', ROOT, {
      tenant,
      scopes: ['runs:read', 'runs:write'],
      name: 'flow',
    });
    expect(made.status).toBe(201);
    keys[tenant] = made.body.key as string;
  }
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await tools?.close();
});

describe('limits through the API', () => {
  it('shows the limits in force and where they come from, and refuses a bad document naming the field', async () => {
    const bad = await call('PUT', '/v1/limits', ROOT, {
      limits: [{ name: 'x', key: 'url', concurrency: 0 }],
    });
    expect(bad.status).toBe(400);
    expect((bad.body.error as { issues: { path: string }[] }).issues.map((i) => i.path).sort()).toEqual([
      'limits.0.concurrency',
      'limits.0.key',
    ]);
    expect((await call('PUT', '/v1/limits', keys.big!, { limits: [] })).status).toBe(403);
    await setLimits([{ name: 'shown', key: 'host', concurrency: 3 }]);
    const got = await call('GET', '/v1/limits', ROOT);
    expect(got.body).toMatchObject({
      source: 'api',
      limits: [{ name: 'shown', concurrency: 3, fairBy: 'tenant' }],
    });
    const back = await call('DELETE', '/v1/limits', ROOT);
    expect(back.body).toMatchObject({ source: 'configuration', limits: [] });
  });
});

describe('concurrency', () => {
  it('never has more calls to a host in flight than its limit, across runs, and records the wait', async () => {
    await setLimits([{ name: 'hosts', key: 'host', match: host, concurrency: 2 }]);
    const runs = await Promise.all(
      Array.from({ length: 10 }, (_, i) => submit('big', `conc-${i}`, { ms: 150 })),
    );
    const docs = await Promise.all(runs.map((id) => settled('big', id)));
    expect(docs.map((d) => d.status)).toEqual(Array(10).fill('succeeded'));
    const hits = hitsOf('conc-');
    expect(hits).toHaveLength(10);
    expect(maxOverlap(hits)).toBe(2);
    // Most of them were held back: their node records the time, their stream the event.
    const held = docs.filter((d) => (d.nodes.call!.throttledMs ?? 0) > 0);
    expect(held.length).toBeGreaterThanOrEqual(6);
    const stream = await openEvents(stack.url, held[0]!.runId, {
      headers: { authorization: `Bearer ${keys.big}` },
    });
    const events = await stream.events;
    expect(events.find((e) => e.data.type === 'node.throttled')?.data.data).toMatchObject({
      key: `hosts=${host}`,
    });
    // Held back, not failed or retried: one attempt each, one tool call charged.
    for (const d of docs) {
      expect(d.nodes.call!.attempts).toHaveLength(1);
      expect(d.usage.toolCalls).toBe(1);
    }
  });

  it('gives back what a node asked for beside its start when the node does not make its call', async () => {
    // A json node's call is known before it starts (literal arguments): it asks early.
    await setLimits([{ name: 'json-calls', key: 'tool', match: 'json', concurrency: 1 }]);
    const json = (id: string, value: number) => ({ id, kind: 'tool', tool: 'json', args: { value } });
    const posted = await call('POST', '/v1/runs', keys.big!, {
      graph: { nodes: [json('first', 1), json('second', 2)], edges: [['first', 'second']] },
      // The second node's call is over the budget: it ends before calling.
      budget: { toolCalls: 1 },
    });
    expect(posted.status).toBe(202);
    const doc = await settled('big', posted.body.runId as string);
    expect(doc.nodes.first).toMatchObject({ status: 'succeeded' });
    expect(doc.nodes.second).toMatchObject({ status: 'failed', error: { code: 'budget_exhausted' } });
    const counter = async () =>
      ((await call('GET', '/v1/limits', ROOT)).body.counters as { key: string; inFlight: number }[]).find(
        (c) => c.key === 'json-calls=json',
      );
    await expect.poll(counter, { timeout: 5000, interval: 50 }).toMatchObject({ inFlight: 0 });
    // Nothing was kept: the next runs' calls go through one at a time.
    const next = await Promise.all(
      [3, 4, 5].map(async (value) => {
        const run = await call('POST', '/v1/runs', keys.big!, { graph: { nodes: [json('only', value)] } });
        return settled('big', run.body.runId as string);
      }),
    );
    expect(next.map((d) => d.output)).toEqual([{ only: 3 }, { only: 4 }, { only: 5 }]);
    expect((await counter())?.inFlight).toBe(0);
  });
});

describe('fair share and priority', () => {
  it("serves a small tenant's runs between a big tenant's burst, not after it", async () => {
    await setLimits([{ name: 'fair', key: 'host', match: host, concurrency: 4 }]);
    const burst = await Promise.all(Array.from({ length: 120 }, (_, i) => submit('big', `burst-${i}`)));
    // The small tenant comes once the burst is queued behind the limit.
    await expect.poll(() => hitsOf('burst-').length, { timeout: 20_000, interval: 20 }).toBeGreaterThan(4);
    const few = await Promise.all(Array.from({ length: 8 }, (_, i) => submit('small', `few-${i}`)));
    const small = await Promise.all(few.map((id) => settled('small', id)));
    expect(small.map((d) => d.status)).toEqual(Array(8).fill('succeeded'));
    const lastSmall = Math.max(...hitsOf('few-').map((h) => h.end!));
    const bigDone = hitsOf('burst-').filter((h) => h.end !== undefined && h.end <= lastSmall).length;
    // Round-robin: the small tenant's 8 calls went out alternating with the burst's, so when its
    // last one ended only a small share of the 120 had been served.
    expect(bigDone).toBeLessThan(60);
    const big = await Promise.all(burst.map((id) => settled('big', id)));
    expect(big.every((d) => d.status === 'succeeded')).toBe(true);
    expect(maxOverlap([...hitsOf('burst-'), ...hitsOf('few-')])).toBeLessThanOrEqual(4);
  }, 90_000);

  it('lets a higher-priority run overtake a queue of lower ones', async () => {
    await setLimits([{ name: 'prio', key: 'host', match: host, concurrency: 1 }]);
    const low = await Promise.all(
      Array.from({ length: 8 }, (_, i) => submit('big', `low-${i}`, { ms: 150, priority: 1 })),
    );
    await expect.poll(() => hitsOf('low-').length, { timeout: 10_000, interval: 20 }).toBeGreaterThan(0);
    const high = await submit('big', 'high', { ms: 10, priority: 10 });
    expect((await settled('big', high)).status).toBe('succeeded');
    await Promise.all(low.map((id) => settled('big', id)));
    const highStart = hitsOf('high')[0]!.start;
    const before = hitsOf('low-').filter((h) => h.start < highStart).length;
    // At most the call in flight and one granted meanwhile went first; six or more waited.
    expect(before).toBeLessThanOrEqual(2);
    expect(maxOverlap([...hitsOf('low-'), ...hitsOf('high')])).toBe(1);
  }, 60_000);
});

describe('adapting to the service', () => {
  it('pauses a host for every run when one call is answered 429 with Retry-After: 2', async () => {
    await setLimits([{ name: 'pause', key: 'host', match: host, concurrency: 10 }]);
    const first = await submit('big', 'limited', {
      path: '/retry-after?node=limited&value=2&status=429',
      retry: { rate_limited: 0 },
    });
    expect((await settled('big', first)).status).toBe('failed');
    const limitedEnd = hitsOf('limited')[0]!.end!;
    const later = await Promise.all([
      submit('big', 'after-0'),
      submit('small', 'after-1'),
      submit('small', 'after-2'),
    ]);
    const docs = await Promise.all(later.map((id, i) => settled(i === 0 ? 'big' : 'small', id)));
    expect(docs.map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    // No call reached the host until the pause it asked for was over (less the clock's granularity).
    for (const hit of hitsOf('after-')) expect(hit.start).toBeGreaterThanOrEqual(limitedEnd + 1900);
    for (const d of docs) expect(d.nodes.call!.throttledMs).toBeGreaterThan(1000);
    // The counter was cut for a while, and shows it.
    const counters = (await call('GET', '/v1/limits', ROOT)).body.counters as {
      key: string;
      factor: number;
    }[];
    expect(counters.find((c) => c.key === `pause=${host}`)?.factor).toBeLessThan(1);
  }, 60_000);
});
