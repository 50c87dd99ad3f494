/**
 * Outbound webhooks end to end, on a real Redis, real worker pools and a loopback receiver: a run's
 * own `webhook` and a tenant's subscriptions, signatures checked against the exact bytes received,
 * retries after 500s, the egress policy, tenants kept apart, and no secret anywhere it should not be.
 */
import { Job, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandsWhile } from './support/monitor.js';
import type { DeliveryAttempt, RunDocument, WebhookEvent } from '@tetraloop/core/domain';
import { WEBHOOK_JOB } from '@tetraloop/core/queues';
import { webhookKeys } from '@tetraloop/core/state';
import { verifyWebhookSignature } from '@tetraloop/core/webhooks';
import { rootJobFinished, startStack, type Stack } from './support/stack.js';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.js';

const ROOT = 'root-token-for-outbound-webhooks';
let stack: Stack;
let receiver: WebhookReceiver;
let redis: Redis;
let sense: Queue;
let senseEvents: QueueEvents;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  stack = await startStack({
    pools: ['plan', 'tool', 'sense'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_SECRET_KEY: 'c'.repeat(64),
      TETRALOOP_WEBHOOK_BACKOFF_BASE_MS: '500',
      TETRALOOP_WEBHOOK_ATTEMPTS: '4',
    },
  });
  redis = new Redis(stack.env.REDIS_URL!, { maxRetriesPerRequest: null });
  sense = new Queue('sense', { connection: redis, prefix: stack.prefix });
  senseEvents = new QueueEvents('sense', { connection: redis.duplicate(), prefix: stack.prefix });
  await senseEvents.waitUntilReady();
}, 30_000);

afterAll(async () => {
  await senseEvents?.close();
  await sense?.close();
  redis?.disconnect();
  await stack?.close();
  await receiver?.close();
});

/** A request as the root token acting for `tenant`. */
async function call(
  tenant: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.url}${path}`, {
    method: method.toUpperCase(),
    headers: {
      authorization: `Bearer ${ROOT}`,
      'x-tetraloop-tenant': tenant,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const graph = (value: unknown) => ({ nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value } }] });

/** Submits a run for `tenant` and waits for it to settle. */
async function runToEnd(tenant: string, request: Record<string, unknown>): Promise<RunDocument> {
  const posted = await call(tenant, 'post', '/v1/runs', request);
  expect(posted.status, JSON.stringify(posted.body)).toBe(202);
  const waited = await call(tenant, 'get', `/v1/runs/${posted.body.runId as string}/wait?timeoutMs=20000`);
  expect(waited.status).toBe(200);
  return waited.body as unknown as RunDocument;
}

/** Waits until the delivery (its job's id is the event's id) has finished, however many attempts it took. */
async function delivered(id: string): Promise<unknown> {
  const job = await Job.fromId(sense, id);
  if (!job) throw new Error(`no delivery job ${id}`);
  return job.waitUntilFinished(senseEvents, 30_000);
}

/** Waits until the run's root job has finished: its finalize pass enqueues the deliveries. */
const finalized = (runId: string): Promise<void> => rootJobFinished(stack, runId, 10_000);

/** Whether any delivery job was made for the run, in any state. */
async function hasDeliveryJob(runId: string): Promise<boolean> {
  const jobs = await sense.getJobs(['completed', 'waiting', 'delayed', 'active', 'prioritized', 'failed']);
  return jobs.some((j) => j.name === WEBHOOK_JOB && (j.data as { runId: string }).runId === runId);
}

const eventOf = (raw: Buffer): WebhookEvent => JSON.parse(raw.toString('utf8')) as WebhookEvent;

describe('outbound webhooks', () => {
  it("post a run's run.finished to its own webhook, signed with the tenant's signing secret", async () => {
    // No signing secret yet: a run that asks for a webhook is refused, not accepted unverifiable.
    const refused = await call('acme', 'post', '/v1/runs', {
      graph: graph(1),
      webhook: { url: `${receiver.url}/own` },
    });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { code: 'webhook_secret_missing' } });
    expect(
      (await call('acme', 'post', '/v1/runs', { graph: graph(1), webhook: { url: 'ftp://x.test' } })).status,
    ).toBe(400);

    const made = await call('acme', 'post', '/v1/webhooks/secret');
    expect(made.status).toBe(201);
    const secret = made.body.secret as string;
    expect(secret).toMatch(/^whsec_/);

    const doc = await runToEnd('acme', {
      graph: graph({ answer: 42 }),
      webhook: { url: `${receiver.url}/own` },
    });
    expect(doc.status).toBe('succeeded');
    const [hit] = await receiver.until('/own', 1);
    const event = eventOf(hit!.raw);
    expect(await delivered(event.id)).toEqual({ outcome: 'delivered' });

    // The signature is over the exact bytes received.
    const check = verifyWebhookSignature(hit!.headers['x-tetraloop-signature'] as string, secret, hit!.raw, {
      nowSeconds: Math.floor(Date.now() / 1000),
      toleranceSeconds: 300,
    });
    expect(check.ok).toBe(true);
    expect(hit!.headers['content-type']).toBe('application/json');
    expect(hit!.headers['x-tetraloop-event']).toBe('run.finished');
    expect(hit!.headers['x-tetraloop-delivery']).toBe(event.id);
    expect(event).toMatchObject({
      type: 'run.finished',
      data: {
        runId: doc.runId,
        agentId: 'main',
        sessionKey: null,
        status: 'succeeded',
        error: null,
        finishedAt: doc.finishedAt,
        output: { a: { answer: 42 } },
      },
    });
    expect(event.data.usage).toMatchObject({ toolCalls: 1 });

    // The run document shows where its events go and how the delivery went, never a secret.
    const after = (await call('acme', 'get', `/v1/runs/${doc.runId}`)).body as unknown as RunDocument;
    expect(after.webhook).toMatchObject({ url: `${receiver.url}/own`, events: ['run.finished'] });
    expect(after.webhook!.deliveries).toMatchObject([
      { deliveryId: event.id, attempt: 1, outcome: 'delivered', status: 200, error: null },
    ]);
    // The run's event stream (it has ended, so the server closes it).
    const events = await (
      await fetch(`${stack.url}/v1/runs/${doc.runId}/events`, {
        headers: { authorization: `Bearer ${ROOT}`, 'x-tetraloop-tenant': 'acme' },
      })
    ).text();
    expect(events).toContain('run.finished');
    for (const text of [JSON.stringify(after), events]) expect(text).not.toContain(secret);
    // Nor in the delivery job.
    const job = await Job.fromId(sense, event.id);
    expect(JSON.stringify(job!.data)).not.toContain(secret);
  });

  it("deliver a subscription every run of its tenant and no other tenant's", async () => {
    const sub = await call('zeta', 'post', '/v1/webhooks', { url: `${receiver.url}/zeta` });
    expect(sub.status).toBe(201);
    const { id, secret } = sub.body as { id: string; secret: string };
    const list = await call('zeta', 'get', '/v1/webhooks');
    expect(list.body).toEqual({
      webhooks: [
        { id, url: `${receiver.url}/zeta`, events: ['run.finished'], createdAt: expect.any(String) },
      ],
    });
    expect(JSON.stringify(list.body)).not.toContain(secret);

    const mine = [await runToEnd('zeta', { graph: graph(1) }), await runToEnd('zeta', { graph: graph(2) })];
    const theirs = await runToEnd('omega', { graph: graph(3) });
    const hits = await receiver.until('/zeta', 2);
    for (const hit of hits) await delivered(eventOf(hit.raw).id);
    expect(hits.map((h) => eventOf(h.raw).data.runId).sort()).toEqual(mine.map((d) => d.runId).sort());
    for (const hit of hits) {
      const check = verifyWebhookSignature(hit.headers['x-tetraloop-signature'] as string, secret, hit.raw, {
        nowSeconds: Math.floor(Date.now() / 1000),
        toleranceSeconds: 300,
      });
      expect(check.ok).toBe(true);
    }
    // The other tenant's run was finalized (its root job done) and made no delivery job at all.
    await finalized(theirs.runId);
    const jobs = await sense.getJobs(['completed', 'waiting', 'delayed', 'active', 'prioritized', 'failed']);
    const deliveries = jobs.filter((j) => j.name === WEBHOOK_JOB);
    expect(deliveries.some((j) => (j.data as { runId: string }).runId === theirs.runId)).toBe(false);
    expect(receiver.received.some((r) => eventOf(r.raw).data.runId === theirs.runId)).toBe(false);

    const recorded = await call('zeta', 'get', `/v1/webhooks/${id}/deliveries`);
    expect((recorded.body.deliveries as DeliveryAttempt[]).map((d) => d.outcome)).toEqual([
      'delivered',
      'delivered',
    ]);
    // Another tenant does not find it.
    expect((await call('omega', 'get', `/v1/webhooks/${id}/deliveries`)).status).toBe(404);
    expect((await call('zeta', 'delete', `/v1/webhooks/${id}`)).status).toBe(204);
  });

  it('retry a receiver that answers 500 twice, with growing delays, until it takes the delivery', async () => {
    const sub = await call('flaky', 'post', '/v1/webhooks', { url: `${receiver.url}/flaky` });
    const id = sub.body.id as string;
    receiver.script('/flaky', [500, 500]);
    const doc = await runToEnd('flaky', { graph: graph(1) });
    const hits = await receiver.until('/flaky', 3);
    const event = eventOf(hits[0]!.raw);
    expect(await delivered(event.id)).toEqual({ outcome: 'delivered' });
    // One delivery: the same id and the same body on every attempt.
    expect(new Set(hits.map((h) => h.headers['x-tetraloop-delivery']))).toEqual(new Set([event.id]));
    expect(hits.map((h) => eventOf(h.raw).data.runId)).toEqual([doc.runId, doc.runId, doc.runId]);

    const attempts = (
      (await call('flaky', 'get', `/v1/webhooks/${id}/deliveries`)).body.deliveries as DeliveryAttempt[]
    ).reverse();
    expect(attempts.map((a) => [a.attempt, a.outcome, a.status, a.error])).toEqual([
      [1, 'retrying', 500, 'server'],
      [2, 'retrying', 500, 'server'],
      [3, 'delivered', 200, null],
    ]);
    // Exponential backoff: the second wait is longer than the first (±20 % jitter cannot undo a doubling).
    const at = attempts.map((a) => Date.parse(a.at));
    expect(at[2]! - at[1]!).toBeGreaterThan(at[1]! - at[0]!);
    expect(Date.parse(attempts[0]!.retryAt!)).toBeLessThanOrEqual(at[1]!);
  });

  it('refuse a private address that is not allowlisted, and record it', async () => {
    // The stack allowlists 127.0.0.1 (TETRALOOP_HTTP_ALLOW_HOSTS): `localhost` resolves to a
    // loopback address and is not on the list, so the egress policy refuses it.
    const sub = await call('priv', 'post', '/v1/webhooks', {
      url: `http://localhost:${receiver.port}/private`,
    });
    const id = sub.body.id as string;
    await finalized((await runToEnd('priv', { graph: graph(1) })).runId);
    const [job] = (await sense.getJobs(['completed', 'waiting', 'delayed', 'active', 'prioritized'])).filter(
      (j) => j.name === WEBHOOK_JOB && (j.data as { tenant: string }).tenant === 'priv',
    );
    expect(await delivered(job!.id!)).toEqual({ outcome: 'refused' });
    const attempts = (await call('priv', 'get', `/v1/webhooks/${id}/deliveries`)).body.deliveries;
    expect(attempts).toMatchObject([
      { attempt: 1, outcome: 'refused', status: null, error: 'egress_denied' },
    ]);
    expect(receiver.received.some((r) => r.path === '/private')).toBe(false);
  });

  it('announce a node waiting for a signal and a node that failed, then the run finishing', async () => {
    expect((await call('waits', 'post', '/v1/webhooks/secret')).status).toBe(201);
    const posted = await call('waits', 'post', '/v1/runs', {
      graph: {
        nodes: [
          { id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 60 },
          // Nothing listens there: the node fails at once; the run goes on past it.
          {
            id: 'broken',
            kind: 'tool',
            tool: 'http',
            args: { url: 'http://127.0.0.1:9/' },
            retry: { network: 0 },
            onError: 'continue',
          },
        ],
      },
      webhook: { url: `${receiver.url}/steps`, events: ['run.waiting', 'node.failed', 'run.finished'] },
    });
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const runId = posted.body.runId as string;
    const announced = await receiver.until('/steps', 2);
    const types = announced.map((hit) => eventOf(hit.raw).type).sort();
    expect(types).toEqual(['node.failed', 'run.waiting']);
    const waiting = announced.map((hit) => eventOf(hit.raw)).find((e) => e.type === 'run.waiting')!;
    expect(waiting.data).toMatchObject({ runId, nodeId: 'gate', reason: 'signal', signal: 'go' });
    const failed = announced.map((hit) => eventOf(hit.raw)).find((e) => e.type === 'node.failed')!;
    expect(failed.data).toMatchObject({ runId, nodeId: 'broken', failsRun: false });
    expect((await call('waits', 'post', `/v1/runs/${runId}/signals/go`, { ok: true })).status).toBe(202);
    const all = await receiver.until('/steps', 3);
    expect(eventOf(all[2]!.raw)).toMatchObject({
      type: 'run.finished',
      data: { runId, status: 'succeeded' },
    });
  });

  it("read a tenant's subscriptions once, and hear of each one made or deleted since in every process", async () => {
    const subscriptions = webhookKeys(stack.prefix, 'kappa').subscriptions;
    // The first run of the tenant reads its subscriptions (none) into each process's copy.
    await finalized((await runToEnd('kappa', { graph: graph(1) })).runId);
    // Every read of the second run's announcement, up to its finalize.
    const { commands, out } = await commandsWhile(stack.env.REDIS_URL!, async () =>
      finalized((await runToEnd('kappa', { graph: graph(2) })).runId),
    );
    if (out instanceof Error) throw out;
    const reads = commands.filter(({ args }) => args.includes(subscriptions));
    // Announcing a run of a tenant without subscriptions read nothing.
    expect(reads).toEqual([]);

    // Made through the API process: the worker that finalizes runs drops its copy and hears of it.
    const sub = await call('kappa', 'post', '/v1/webhooks', { url: `${receiver.url}/kappa` });
    expect(sub.status).toBe(201);
    const heard = await runToEnd('kappa', { graph: graph(3) });
    const [hit] = await receiver.until('/kappa', 1);
    expect(eventOf(hit!.raw).data.runId).toBe(heard.runId);
    await delivered(eventOf(hit!.raw).id);

    // Deleted: the next run is announced to nobody.
    expect((await call('kappa', 'delete', `/v1/webhooks/${sub.body.id as string}`)).status).toBe(204);
    const unheard = await runToEnd('kappa', { graph: graph(4) });
    await finalized(unheard.runId);
    expect(await hasDeliveryJob(unheard.runId)).toBe(false);
  });

  it("forget a deleted tenant's subscriptions in every process: a new tenant of the name is announced to nobody", async () => {
    const sub = await call('lambda', 'post', '/v1/webhooks', { url: `${receiver.url}/lambda` });
    expect(sub.status).toBe(201);
    // The worker that settles runs holds the subscription in its copy now.
    const heard = await runToEnd('lambda', { graph: graph(1) });
    const [hit] = await receiver.until('/lambda', 1);
    expect(eventOf(hit!.raw).data.runId).toBe(heard.runId);
    await delivered(eventOf(hit!.raw).id);

    expect((await call('lambda', 'delete', '/v1/tenants/lambda')).status).toBe(200);
    const after = await runToEnd('lambda', { graph: graph(2) });
    await finalized(after.runId);
    expect(await hasDeliveryJob(after.runId)).toBe(false);
  });

  it('cap the subscriptions of a tenant', async () => {
    for (let i = 0; i < 20; i++)
      expect((await call('many', 'post', '/v1/webhooks', { url: `https://example.test/${i}` })).status).toBe(
        201,
      );
    const over = await call('many', 'post', '/v1/webhooks', { url: 'https://example.test/over' });
    expect(over.status).toBe(409);
    expect(over.body).toMatchObject({ error: { code: 'too_many_webhooks' } });
  });
});
