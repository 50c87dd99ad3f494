/**
 * Events that start runs (docs/triggers.md), on a real Redis with the API and two sense pools (so
 * matching, debounce and batch jobs are shared between workers): an event starts a trigger's run
 * once, a filter that does not hold starts nothing, ten events of one key within a debounce start
 * one run with the last, 250 events in batches of 100 start three runs that cover them all once,
 * another tenant neither sees the trigger nor fires it, and a signed webhook source with `event`
 * fires one. Each wait is on BullMQ's job state or on the run search, with a deadline.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument, RunListing } from '@tetraloop/core/domain';
import { createLogger } from '@tetraloop/core/logging';
import { closeQueues, openQueues, type LoopQueues } from '@tetraloop/core/queues';
import { TRIGGER_JOB, eventJobId } from '@tetraloop/core/triggers';
import { eventsCommand, triggersCommand, type TriggersIo } from '@tetraloop/cli';
import { signWebhook } from '@tetraloop/core/webhooks';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';
import { startStack, type Stack } from './support/stack.js';

const ROOT = 'root-token-0123456789-0123456789-0123456789';
const SHOP_SECRET = 'shop-webhook-secret-0123456789';
const TRIGGERS_MAX = 8;
let stack: Stack;
let secondSense: PoolsHandle;
let queues: LoopQueues;
let redis: Redis;
let acme: string;
let beta: string;

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function call(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${stack.url}${path}`, {
    method: method.toUpperCase(),
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function makeKey(tenant: string): Promise<string> {
  const made = await call('post', '/v1/keys', ROOT, {
    tenant,
    scopes: ['runs:read', 'runs:write', 'events:write', 'triggers:read', 'triggers:write'],
  });
  expect(made.status).toBe(201);
  return made.body.key as string;
}

/** A graph that answers its input's `value`. */
const echo = (input: unknown) => ({
  graph: { nodes: [{ id: 'echo', kind: 'tool', tool: 'json', args: { value: { $ref: 'input.value' } } }] },
  input,
});

async function makeTrigger(key: string, body: Record<string, unknown>): Promise<string> {
  const made = await call('post', '/v1/triggers', key, body);
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  return made.body.id as string;
}

async function runsOf(key: string, triggerId: string): Promise<RunListing[]> {
  const page = await call('get', `/v1/runs?triggerId=${triggerId}&limit=200`, key);
  expect(page.status).toBe(200);
  return page.body.runs as RunListing[];
}

async function settled(key: string, runId: string): Promise<RunDocument> {
  const res = await call('get', `/v1/runs/${runId}/wait?timeoutMs=20000`, key);
  expect(res.status).toBe(200);
  return res.body as unknown as RunDocument;
}

async function send(key: string, event: Record<string, unknown>): Promise<Answer> {
  return call('post', '/v1/events', key, event);
}

/** Waits until the sense loop has matched the event (its job completed). */
async function matched(tenant: string, eventId: string): Promise<void> {
  await expect
    .poll(() => queues.sense.getJobState(eventJobId(tenant, eventId)), { timeout: 20_000, interval: 50 })
    .toBe('completed');
}

/** Waits until no job of `name` is waiting, delayed or running. */
async function drained(name: string): Promise<void> {
  await expect
    .poll(
      async () =>
        (await queues.sense.getJobs(['waiting', 'delayed', 'active', 'prioritized'])).filter(
          (j) => j?.name === name,
        ).length,
      { timeout: 30_000, interval: 100 },
    )
    .toBe(0);
}

beforeAll(async () => {
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_TRIGGERS_MAX: String(TRIGGERS_MAX),
      TETRALOOP_WEBHOOKS: JSON.stringify([
        { name: 'shop', secret: SHOP_SECRET, tenant: 'acme', event: 'shop.order' },
      ]),
    },
  });
  // A second worker process's sense pool: every trigger job may run in either.
  secondSense = await startPools(parseWorkerEnv(stack.env), { pools: ['sense'] });
  redis = new Redis(stack.env.REDIS_URL!);
  queues = openQueues(redis, stack.prefix, createLogger({ level: 'silent', layer: 'sense' }));
  acme = await makeKey('acme');
  beta = await makeKey('beta');
}, 60_000);

afterAll(async () => {
  await secondSense?.close();
  await stack?.close();
  if (queues) await closeQueues(queues);
  redis?.disconnect();
});

describe('events that start runs', () => {
  let orders: string;

  it('starts a run once per event: a repeated id is a duplicate and starts nothing', async () => {
    orders = await makeTrigger(acme, {
      event: 'order.created',
      filter: { path: 'payload.total', gte: 100 },
      request: echo({ value: { $ref: 'event.payload.customer' } }),
    });
    const first = await send(acme, {
      name: 'order.created',
      id: 'o-1',
      payload: { total: 150, customer: 'ada' },
    });
    expect(first).toEqual({ status: 202, body: { id: 'o-1', name: 'order.created', duplicate: false } });
    const again = await send(acme, {
      name: 'order.created',
      id: 'o-1',
      payload: { total: 999, customer: 'eve' },
    });
    expect(again.body.duplicate).toBe(true);
    await matched('acme', 'o-1');
    const runs = await runsOf(acme, orders);
    expect(runs).toHaveLength(1);
    const doc = await settled(acme, runs[0]!.runId);
    expect(doc).toMatchObject({
      status: 'succeeded',
      triggerId: orders,
      eventIds: ['o-1'],
      input: { value: 'ada' },
    });
    expect(doc.output).toEqual({ echo: 'ada' });
    // A made id when none is given.
    const made = await send(acme, { name: 'order.created', payload: { total: 1 } });
    expect(made.body.id).toMatch(/^evt_/);
  });

  it('starts nothing for an event its filter does not pass', async () => {
    await send(acme, { name: 'order.created', id: 'o-2', payload: { total: 99, customer: 'bob' } });
    await send(acme, { name: 'order.created', id: 'o-3', payload: { customer: 'bob' } });
    await matched('acme', 'o-2');
    await matched('acme', 'o-3');
    expect((await runsOf(acme, orders)).map((r) => r.runId)).toHaveLength(1);
  });

  it('keeps tenants apart: another tenant’s trigger is not found, and its events fire none of yours', async () => {
    expect((await call('get', `/v1/triggers/${orders}`, beta)).status).toBe(404);
    expect((await call('delete', `/v1/triggers/${orders}`, beta)).status).toBe(404);
    expect((await call('get', '/v1/triggers', beta)).body).toEqual({ triggers: [] });
    expect((await call('get', `/v1/triggers/${orders}`, acme)).status).toBe(200);
    // The same event name and id, in beta's tenant: beta has no trigger, acme's does not fire.
    const other = await send(beta, {
      name: 'order.created',
      id: 'o-1',
      payload: { total: 500, customer: 'mallory' },
    });
    expect(other.body.duplicate).toBe(false);
    await matched('beta', 'o-1');
    expect(await runsOf(acme, orders)).toHaveLength(1);
    expect(await runsOf(beta, orders)).toEqual([]);
  });

  it('debounces: ten events of one key within its quiet period start one run, with the last', async () => {
    const carts = await makeTrigger(acme, {
      event: 'cart.updated',
      debounce: { key: '{{event.payload.customer}}', ms: 1500 },
      request: echo({ value: { $ref: 'event.payload.n' } }),
    });
    for (let n = 1; n <= 10; n++) {
      expect(
        (await send(acme, { name: 'cart.updated', id: `ada-${n}`, payload: { customer: 'ada', n } })).status,
      ).toBe(202);
    }
    await send(acme, { name: 'cart.updated', id: 'bob-1', payload: { customer: 'bob', n: 100 } });
    for (let n = 1; n <= 10; n++) await matched('acme', `ada-${n}`);
    await matched('acme', 'bob-1');
    await drained(TRIGGER_JOB.debounce);
    const runs = await runsOf(acme, carts);
    expect(runs).toHaveLength(2);
    const docs = await Promise.all(runs.map((r) => settled(acme, r.runId)));
    const byInput = Object.fromEntries(docs.map((d) => [String((d.input as { value: number }).value), d]));
    expect(Object.keys(byInput).sort()).toEqual(['10', '100']);
    expect(byInput['10']).toMatchObject({ eventIds: ['ada-10'], status: 'succeeded' });
    expect(byInput['100']).toMatchObject({ eventIds: ['bob-1'] });
  });

  it('batches: 250 events with maxSize 100 start three runs that consume each event once', async () => {
    const clicks = await makeTrigger(acme, {
      event: 'click',
      batch: { maxSize: 100, maxWaitMs: 8000 },
      request: echo({ value: { $ref: 'events.0.id' } }),
    });
    const ids = Array.from({ length: 250 }, (_, i) => `c-${i}`);
    for (let i = 0; i < ids.length; i += 25) {
      await Promise.all(ids.slice(i, i + 25).map((id) => send(acme, { name: 'click', id, payload: { id } })));
    }
    await expect
      .poll(async () => (await runsOf(acme, clicks)).length, { timeout: 30_000, interval: 200 })
      .toBe(3);
    await drained(TRIGGER_JOB.flush);
    const runs = await runsOf(acme, clicks);
    expect(runs).toHaveLength(3);
    const docs = await Promise.all(runs.map((r) => settled(acme, r.runId)));
    const consumed = docs.flatMap((d) => d.eventIds ?? []);
    for (const doc of docs) expect(doc.eventIds!.length).toBeLessThanOrEqual(100);
    expect(consumed).toHaveLength(250);
    expect(new Set(consumed)).toEqual(new Set(ids));
  });

  it('fires a trigger from a signed webhook source configured with `event`', async () => {
    const shop = await makeTrigger(acme, {
      event: 'shop.order',
      request: echo({ value: { $ref: 'event.payload.order' } }),
    });
    const raw = JSON.stringify({ eventId: 'w-1', type: 'order', payload: { order: 42 } });
    const res = await fetch(`${stack.url}/v1/sources/shop/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tetraloop-signature': signWebhook(SHOP_SECRET, raw) },
      body: raw,
    });
    expect(res.status).toBe(202);
    await matched('acme', 'shop/w-1');
    const runs = await runsOf(acme, shop);
    expect(runs).toHaveLength(1);
    expect(await settled(acme, runs[0]!.runId)).toMatchObject({
      eventIds: ['shop/w-1'],
      output: { echo: 42 },
    });
  });

  it('checks a trigger whole when it is made, naming the field; bounds a tenant’s triggers', async () => {
    const issuesOf = async (body: unknown): Promise<[number, unknown]> => {
      const res = await call('post', '/v1/triggers', beta, body);
      return [res.status, (res.body.error as { issues?: { path: string }[] })?.issues?.map((i) => i.path)];
    };
    const graph = { nodes: [{ id: 'a', kind: 'tool', tool: 'nope', args: {} }] };
    expect(await issuesOf({ event: 'x', request: { graph } })).toEqual([400, ['request.graph.nodes.0.tool']]);
    expect(await issuesOf({ event: 'x', request: { task: 'a', graph: {} } })).toMatchObject([
      400,
      ['request.task'],
    ]);
    expect(
      await issuesOf({ event: 'x', filter: { path: 'input.a', eq: 1 }, request: echo({ value: 1 }) }),
    ).toEqual([400, ['filter.path']]);
    expect(
      await issuesOf({ event: 'x', filter: { path: 'payload.a' }, request: echo({ value: 1 }) }),
    ).toEqual([400, ['filter']]);
    expect(
      await issuesOf({
        event: 'x',
        debounce: { ms: 100 },
        batch: { maxSize: 2, maxWaitMs: 100 },
        request: echo({ value: 1 }),
      }),
    ).toEqual([400, ['batch']]);
    expect(await issuesOf({ event: 'bad name', request: echo({ value: 1 }) })).toEqual([400, ['event']]);
    for (let i = 0; i < TRIGGERS_MAX; i++)
      await makeTrigger(beta, { event: `e${i}`, request: echo({ value: i }) });
    const over = await call('post', '/v1/triggers', beta, { event: 'one-more', request: echo({ value: 1 }) });
    expect(over.status).toBe(409);
    expect(over.body).toMatchObject({ error: { code: 'too_many_triggers' } });
  });

  it('makes, lists and deletes triggers and sends events from the command line', async () => {
    const out: string[] = [];
    const io: TriggersIo = {
      apiUrl: stack.url,
      apiKey: acme,
      stdout: (text) => void out.push(text),
      stderr: () => undefined,
      read: () => JSON.stringify({ event: 'cli.ping', request: echo({ value: { $ref: 'event.key' } }) }),
    };
    expect(await triggersCommand(['create', 'trigger.json'], io)).toBe(0);
    const made = JSON.parse(out.join('')) as { id: string };
    out.length = 0;
    expect(await triggersCommand(['list'], io)).toBe(0);
    expect(out.join('')).toContain(made.id);
    expect(
      await eventsCommand(['send', 'cli.ping', '--id', 'p-1', '--key', 'k7', '--payload', '{"a":1}'], io),
    ).toBe(0);
    await matched('acme', 'p-1');
    const runs = await runsOf(acme, made.id);
    expect(runs).toHaveLength(1);
    expect(await settled(acme, runs[0]!.runId)).toMatchObject({ output: { echo: 'k7' } });
    expect(await triggersCommand(['delete', made.id], io)).toBe(0);
    expect(await triggersCommand(['delete', made.id], io)).toBe(1);
    expect(await eventsCommand(['send'], io)).toBe(2);
  });

  it('deletes a tenant’s triggers and events with the tenant', async () => {
    expect((await call('delete', '/v1/tenants/beta', ROOT)).status).toBe(200);
    const left = await redis.keys(`${stack.prefix}:*{t:beta}*`);
    expect(left.filter((k) => k.includes(':triggers:') || k.includes(':events:'))).toEqual([]);
  });
});
