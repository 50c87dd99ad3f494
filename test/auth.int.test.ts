/**
 * Keys, scopes and tenants over HTTP with auth required. The matrix is generated from the route
 * table: every route × {no key, revoked key, a key without the route's scope, another tenant's
 * key, the right key} answers 401 / 401 / 403 / 404 (for what another tenant owns; its own answer
 * otherwise) / 2xx — a route added to the table without an example here fails the test. Then:
 * two tenants' sessions of one name, approvals recorded with their key, the root token, and a
 * tenant deleted without a key left behind; and a key's lineage: a key minted by a key gets
 * nothing beyond its maker (no longer life either), is revoked with it, and is listed under it.
 */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES, type RouteName } from '@tetraloop/api';
import { CONSOLE_PAGES, CONSOLE_SCRIPT_PATH, CONSOLE_STYLE_PATH } from '@tetraloop/console';
import { SCOPES, scopedName, type RunDocument, type Scope } from '@tetraloop/core/domain';
import { QUEUE_NAMES } from '@tetraloop/core/queues';
import { MemoryStore } from '@tetraloop/core/state';
import { proposedLesson } from './support/lessons.js';
import { startModelServer, type ModelServer } from './support/model-server.js';
import { laneIdle, startStack, type Stack } from './support/stack.js';

interface KeyRecord {
  keyId: string;
  tenant: string;
  scopes: string[];
  createdBy?: string;
  expiresAt?: string;
}

const ROOT = 'root-token-0123456789-0123456789-0123456789';
let stack: Stack;
let redis: Redis;
let model: ModelServer;
/** The sense queue, where schedules' job schedulers live. */
let sense: Queue;

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function call(
  method: string,
  path: string,
  options: { key?: string; body?: unknown; tenant?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.tenant) headers['x-tetraloop-tenant'] = options.tenant;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const gone = new AbortController();
  const res = await fetch(`${stack.url}${path}`, {
    method: method.toUpperCase(),
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    signal: gone.signal,
  });
  // An event stream never ends by itself: its status is all that is needed.
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    gone.abort();
    return { status: res.status, body: {} };
  }
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    // NDJSON (a transcript) and other non-JSON answers: the status is what the matrix checks.
  }
  return { status: res.status, body };
}

async function makeKey(tenant: string, scopes: readonly Scope[]): Promise<{ key: string; keyId: string }> {
  const made = await call('post', '/v1/keys', { key: ROOT, body: { tenant, scopes, name: 'test' } });
  expect(made.status).toBe(201);
  return { key: made.body.key as string, keyId: made.body.keyId as string };
}

async function settled(key: string, runId: string): Promise<RunDocument> {
  const res = await call('get', `/v1/runs/${runId}/wait?timeoutMs=20000`, { key });
  expect(res.status).toBe(200);
  return res.body as unknown as RunDocument;
}

const PAUSED_SCHEDULE = {
  name: 'nightly',
  cron: '0 3 * * *',
  paused: true,
  request: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
};

/** A trigger no event of the matrix fires (its event is never sent). */
const triggerBody = {
  event: 'auth.never',
  request: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
};

const waitGraph = (signal: string) => ({
  graph: { nodes: [{ id: 'gate', kind: 'wait', signal, timeoutSeconds: 600, acceptEarly: true }] },
});

/** acme's things each route names, made before the matrix runs. */
interface Fixture {
  doneRun: string;
  failedRun: string;
  cancelRun: string;
  signalRun: string;
  blob: string;
  lesson: string;
  /** Two of acme's webhook subscriptions: one to read, one to delete. */
  webhook: string;
  doomedWebhook: string;
  /** Two of acme's schedules (paused, so they start nothing): one to read and change, one to delete. */
  schedule: string;
  doomedSchedule: string;
  /** Two of acme's triggers: one to read, one to delete. */
  trigger: string;
  doomedTrigger: string;
  /** acme's LangGraph threads: one with a finished run, one to delete, one with a cancelled run. */
  thread: string;
  doomedThread: string;
  cancelledThread: string;
  cancelledRun: string;
}

/** A LangGraph run's body: the agent `main` asked `text`, queued behind the thread's runs. */
const langGraphRun = (text: string) => ({
  assistant_id: 'main',
  input: { messages: [{ role: 'user', content: text }] },
  multitask_strategy: 'enqueue',
});

let acme: string;
let beta: string;
let revoked: string;
let fixture: Fixture;
const withoutScope = new Map<string, string>();

beforeAll(async () => {
  // Session messages become agent runs: a model answers them.
  // A LangGraph run asked to "hang" waits in its model call until it is cancelled.
  model = await startModelServer({
    script: (r) =>
      r.messages.some((m) => m.role === 'user' && m.content?.includes('hang'))
        ? { hang: true }
        : { content: 'noted' },
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool', 'reflect'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_METRICS_TOKEN: 'metrics-token-0123456789',
      TETRALOOP_SECRET_KEY: 'a'.repeat(64),
      TETRALOOP_BLOB_MIN_BYTES: '1024',
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
  sense = new Queue(QUEUE_NAMES.sense, { connection: redis, prefix: stack.prefix });
  acme = (await makeKey('acme', SCOPES)).key;
  beta = (await makeKey('beta', SCOPES)).key;
  const gone = await makeKey('acme', SCOPES);
  expect((await call('delete', `/v1/keys/${gone.keyId}`, { key: ROOT })).status).toBe(204);
  revoked = gone.key;
  for (const scope of SCOPES) {
    withoutScope.set(
      scope,
      (
        await makeKey(
          'acme',
          SCOPES.filter((s) => s !== scope),
        )
      ).key,
    );
  }

  const submit = async (body: unknown): Promise<string> => {
    const res = await call('post', '/v1/runs', { key: acme, body });
    expect(res.status).toBe(202);
    return res.body.runId as string;
  };
  const doneRun = await submit({
    graph: {
      nodes: [
        { id: 'big', kind: 'tool', tool: 'json', args: { value: 'x'.repeat(4000) } },
        // A map, so its item is there to read (runs.item).
        {
          id: 'each',
          kind: 'map',
          over: { $ref: 'input.list' },
          node: { kind: 'tool', tool: 'json', args: { value: '{{item}}' } },
        },
      ],
    },
    input: { list: ['a'] },
  });
  const done = await settled(acme, doneRun);
  const stub = done.nodes.big as unknown as { output: { $blob: string } };
  const failedRun = await submit({
    graph: {
      nodes: [
        {
          id: 'down',
          kind: 'tool',
          tool: 'http',
          retry: { network: 0 },
          args: { url: 'http://127.0.0.1:9/nothing' },
        },
      ],
    },
  });
  expect((await settled(acme, failedRun)).status).toBe('failed');
  const cancelRun = await submit(waitGraph('never'));
  const signalRun = await submit(waitGraph('go'));
  expect(
    (await call('post', '/v1/sessions/alice/messages', { key: acme, body: { text: 'hi' } })).status,
  ).toBe(202);
  const memory = new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 });
  const agent = scopedName('acme', 'main');
  const now = new Date().toISOString();
  const proposed = proposedLesson(agent, now);
  const lesson = proposed.id;
  await memory.saveReflection(agent, [proposed], false, now);
  expect(
    (await call('put', '/v1/secrets/TOKEN', { key: acme, body: { value: 'hunter2-hunter2', hosts: ['*'] } }))
      .status,
  ).toBe(204);
  const subscribe = async (): Promise<string> => {
    const made = await call('post', '/v1/webhooks', {
      key: acme,
      body: { url: 'https://example.test/hook' },
    });
    expect(made.status).toBe(201);
    return (made.body as { id: string }).id;
  };
  const [webhook, doomedWebhook] = [await subscribe(), await subscribe()];
  const schedule = async (): Promise<string> => {
    const made = await call('post', '/v1/schedules', { key: acme, body: PAUSED_SCHEDULE });
    expect(made.status).toBe(201);
    return (made.body as { id: string }).id;
  };
  const [scheduleId, doomedSchedule] = [await schedule(), await schedule()];
  const makeTrigger = async (): Promise<string> => {
    const made = await call('post', '/v1/triggers', { key: acme, body: triggerBody });
    expect(made.status).toBe(201);
    return (made.body as { id: string }).id;
  };
  const [trigger, doomedTrigger] = [await makeTrigger(), await makeTrigger()];
  const thread = async (): Promise<string> => {
    const made = await call('post', '/langgraph/threads', { key: acme, body: {} });
    expect(made.status).toBe(200);
    return made.body.thread_id as string;
  };
  const [langThread, doomedThread, cancelledThread] = [await thread(), await thread(), await thread()];
  expect(
    (
      await call('post', `/langgraph/threads/${langThread}/runs/wait`, {
        key: acme,
        body: langGraphRun('hi'),
      })
    ).status,
  ).toBe(200);
  const cancelled = await call('post', `/langgraph/threads/${cancelledThread}/runs`, {
    key: acme,
    body: langGraphRun('hang'),
  });
  expect(cancelled.status).toBe(200);
  const cancelledRun = cancelled.body.run_id as string;
  expect(
    (
      await call('post', `/langgraph/threads/${cancelledThread}/runs/${cancelledRun}/cancel?wait=1`, {
        key: acme,
      })
    ).status,
  ).toBe(202);
  expect(
    (
      await call('put', '/langgraph/store/items', {
        key: acme,
        body: { namespace: ['auth'], key: 'k', value: { v: 1 } },
      })
    ).status,
  ).toBe(204);
  fixture = {
    thread: langThread,
    doomedThread,
    cancelledThread,
    cancelledRun,
    doneRun,
    failedRun,
    cancelRun,
    signalRun,
    blob: stub.output.$blob,
    lesson,
    webhook,
    doomedWebhook,
    schedule: scheduleId,
    doomedSchedule,
    trigger,
    doomedTrigger,
  };
}, 60_000);

afterAll(async () => {
  await sense?.close();
  await stack?.close();
  await model?.close();
  redis?.disconnect();
});

/** One request per route, as its right caller would make it, and the status that answers it. */
interface Example {
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  ok: number;
}

async function exampleOf(name: RouteName): Promise<Example> {
  const f = fixture;
  switch (name) {
    case 'runs.submit':
      return {
        path: '/v1/runs',
        body: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
        ok: 202,
      };
    case 'runs.list':
      return { path: '/v1/runs?status=succeeded&since=1h', ok: 200 };
    case 'runs.get':
      return { path: `/v1/runs/${f.doneRun}`, ok: 200 };
    case 'runs.wait':
      return { path: `/v1/runs/${f.doneRun}/wait?timeoutMs=0`, ok: 200 };
    case 'runs.explain':
      return { path: `/v1/runs/${f.doneRun}/explain`, ok: 200 };
    case 'runs.item':
      return { path: `/v1/runs/${f.doneRun}/nodes/each/items/0`, ok: 200 };
    case 'runs.events':
      return { path: `/v1/runs/${f.doneRun}/events`, ok: 200 };
    case 'runs.cancel':
      return { path: `/v1/runs/${f.cancelRun}/cancel`, ok: 202 };
    case 'runs.resume':
      return { path: `/v1/runs/${f.failedRun}/resume`, ok: 202 };
    case 'runs.rerun':
      return { path: `/v1/runs/${f.doneRun}/rerun`, body: { from: 'big' }, ok: 202 };
    case 'runs.signal':
      return { path: `/v1/runs/${f.signalRun}/signals/go`, body: { ok: true }, ok: 202 };
    case 'runs.feedback':
      return { path: `/v1/runs/${f.doneRun}/feedback`, body: { score: 1 }, ok: 202 };
    case 'blobs.get':
      return { path: `/v1/blobs/${f.blob}`, ok: 200 };
    case 'usage.get':
      return { path: '/v1/usage', ok: 200 };
    case 'tools.list':
      return { path: '/v1/tools', ok: 200 };
    case 'sessions.message':
      // Another name than the session read below: another tenant's message makes its own session.
      return { path: '/v1/sessions/inbox/messages', body: { text: 'again' }, ok: 202 };
    case 'sessions.list':
      return { path: '/v1/sessions?limit=5', ok: 200 };
    case 'sessions.get':
      return { path: '/v1/sessions/alice', ok: 200 };
    case 'sessions.transcript':
      return { path: '/v1/sessions/alice/transcript', ok: 200 };
    case 'agui.run':
      return {
        path: '/v1/agui/main',
        body: { threadId: 'agui', runId: 'r1', messages: [{ id: 'm1', role: 'user', content: 'hello' }] },
        ok: 200,
      };
    case 'sources.event':
      return { path: '/v1/sources/none/events', ok: 0 };
    case 'sources.list':
      return { path: '/v1/sources', ok: 200 };
    case 'a2a.card':
      return { path: '/v1/a2a/main/.well-known/agent-card.json', ok: 200 };
    case 'a2a.rpc':
      // A JSON-RPC call answers 200 (another tenant's task is an A2A "task not found" inside it).
      return {
        path: '/v1/a2a/main',
        body: { jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: f.doneRun } },
        ok: 200,
      };
    case 'agents.reflect':
      return { path: '/v1/agents/main/reflect', ok: 202 };
    case 'agents.lessons':
      return { path: '/v1/agents/main/lessons', ok: 200 };
    case 'agents.memory':
      return { path: '/v1/agents/main/memory', ok: 200 };
    case 'lessons.patch':
      return { path: `/v1/lessons/${f.lesson}`, body: { status: 'pinned' }, ok: 200 };
    case 'secrets.put':
      return { path: '/v1/secrets/OTHER', body: { value: 'correct-horse', hosts: ['*'] }, ok: 204 };
    case 'secrets.list':
      return { path: '/v1/secrets', ok: 200 };
    case 'secrets.delete':
      return { path: '/v1/secrets/TOKEN', ok: 204 };
    case 'webhooks.create':
      return { path: '/v1/webhooks', body: { url: 'https://example.test/other' }, ok: 201 };
    case 'webhooks.list':
      return { path: '/v1/webhooks', ok: 200 };
    case 'webhooks.secret':
      return { path: '/v1/webhooks/secret', ok: 201 };
    case 'webhooks.deliveries':
      return { path: `/v1/webhooks/${f.webhook}/deliveries`, ok: 200 };
    case 'webhooks.delete':
      return { path: `/v1/webhooks/${f.doomedWebhook}`, ok: 204 };
    case 'schedules.create':
      return { path: '/v1/schedules', body: PAUSED_SCHEDULE, ok: 201 };
    case 'schedules.list':
      return { path: '/v1/schedules', ok: 200 };
    case 'schedules.get':
      return { path: `/v1/schedules/${f.schedule}`, ok: 200 };
    case 'schedules.patch':
      return { path: `/v1/schedules/${f.schedule}`, body: { name: 'renamed' }, ok: 200 };
    case 'schedules.delete':
      return { path: `/v1/schedules/${f.doomedSchedule}`, ok: 204 };
    case 'schedules.trigger':
      return { path: `/v1/schedules/${f.schedule}/trigger`, ok: 202 };
    case 'events.send':
      return { path: '/v1/events', body: { name: 'auth.test', payload: { n: 1 } }, ok: 202 };
    case 'triggers.create':
      return { path: '/v1/triggers', body: triggerBody, ok: 201 };
    case 'triggers.list':
      return { path: '/v1/triggers', ok: 200 };
    case 'triggers.get':
      return { path: `/v1/triggers/${f.trigger}`, ok: 200 };
    case 'triggers.delete':
      return { path: `/v1/triggers/${f.doomedTrigger}`, ok: 204 };
    case 'keys.create':
      return { path: '/v1/keys', body: { scopes: ['runs:read'] }, ok: 201 };
    case 'keys.list':
      return { path: '/v1/keys', ok: 200 };
    case 'keys.revoke':
      // A key of acme's to revoke, made for each request.
      return { path: `/v1/keys/${(await makeKey('acme', ['runs:read'])).keyId}`, ok: 204 };
    case 'tenants.delete':
      await makeKey('gamma', ['runs:read']);
      return { path: '/v1/tenants/gamma', ok: 200 };
    case 'limits.get':
      return { path: '/v1/limits', ok: 200 };
    case 'limits.put':
      return {
        path: '/v1/limits',
        body: { limits: [{ name: 'hosts', key: 'host', concurrency: 50 }] },
        ok: 200,
      };
    case 'limits.delete':
      return { path: '/v1/limits', ok: 200 };
    case 'mcp.message':
      return {
        path: '/mcp',
        body: { jsonrpc: '2.0', id: 1, method: 'ping' },
        headers: { accept: 'application/json, text/event-stream' },
        ok: 200,
      };
    case 'mcp.stream':
      // Stateless: no stream for server-initiated messages, whoever asks.
      return { path: '/mcp', ok: 405 };
    case 'langgraph.assistants.search':
      return { path: '/langgraph/assistants/search', body: {}, ok: 200 };
    case 'langgraph.assistants.get':
      return { path: '/langgraph/assistants/main', ok: 200 };
    case 'langgraph.assistants.versions':
      return { path: '/langgraph/assistants/main/versions', body: {}, ok: 200 };
    case 'langgraph.threads.create':
      return { path: '/langgraph/threads', body: {}, ok: 200 };
    case 'langgraph.threads.search':
      return { path: '/langgraph/threads/search', body: {}, ok: 200 };
    case 'langgraph.threads.get':
      return { path: `/langgraph/threads/${f.thread}`, ok: 200 };
    case 'langgraph.threads.delete':
      return { path: `/langgraph/threads/${f.doomedThread}`, ok: 204 };
    case 'langgraph.threads.state':
      return { path: `/langgraph/threads/${f.thread}/state`, ok: 200 };
    case 'langgraph.threads.history':
      return { path: `/langgraph/threads/${f.thread}/history`, body: {}, ok: 200 };
    case 'langgraph.runs.create':
      return { path: `/langgraph/threads/${f.thread}/runs`, body: langGraphRun('again'), ok: 200 };
    case 'langgraph.runs.stream':
      return { path: `/langgraph/threads/${f.thread}/runs/stream`, body: langGraphRun('again'), ok: 200 };
    case 'langgraph.runs.wait':
      return { path: `/langgraph/threads/${f.thread}/runs/wait`, body: langGraphRun('again'), ok: 200 };
    case 'langgraph.runs.get':
      return { path: `/langgraph/threads/${f.cancelledThread}/runs/${f.cancelledRun}`, ok: 200 };
    case 'langgraph.runs.join':
      return { path: `/langgraph/threads/${f.cancelledThread}/runs/${f.cancelledRun}/join`, ok: 200 };
    case 'langgraph.runs.joinStream':
      return { path: `/langgraph/threads/${f.cancelledThread}/runs/${f.cancelledRun}/stream`, ok: 200 };
    case 'langgraph.runs.cancel':
      return { path: `/langgraph/threads/${f.cancelledThread}/runs/${f.cancelledRun}/cancel`, ok: 202 };
    case 'langgraph.stateless.create':
      return { path: '/langgraph/runs', body: langGraphRun('alone'), ok: 200 };
    case 'langgraph.stateless.stream':
      return { path: '/langgraph/runs/stream', body: langGraphRun('alone'), ok: 200 };
    case 'langgraph.stateless.wait':
      return { path: '/langgraph/runs/wait', body: langGraphRun('alone'), ok: 200 };
    case 'langgraph.store.put':
      return {
        path: '/langgraph/store/items',
        body: { namespace: ['auth'], key: 'k2', value: { v: 2 } },
        ok: 204,
      };
    case 'langgraph.store.get':
      return { path: '/langgraph/store/items?namespace=auth&key=k', ok: 200 };
    case 'langgraph.store.delete':
      return { path: '/langgraph/store/items', body: { namespace: ['auth'], key: 'gone' }, ok: 204 };
    case 'langgraph.store.search':
      return { path: '/langgraph/store/items/search', body: { namespace_prefix: ['auth'] }, ok: 200 };
    case 'langgraph.store.namespaces':
      return { path: '/langgraph/store/namespaces', body: {}, ok: 200 };
  }
}

describe('the auth matrix', () => {
  const routes = Object.entries(ROUTES) as [RouteName, (typeof ROUTES)[RouteName]][];

  it.each(routes)('%s', async (name, route) => {
    const example = await exampleOf(name);
    const send = async (key: string | undefined): Promise<Answer> =>
      call(route.method, example.path, {
        ...(key ? { key } : {}),
        ...(example.body !== undefined ? { body: example.body } : {}),
        ...(example.headers ? { headers: example.headers } : {}),
      });
    if (route.access === 'signature') {
      // A webhook carries a signature, not a key (test/webhooks.int.test.ts): without one,
      // whatever key is sent, an unknown source is not found and a known one refuses it.
      expect((await send(acme)).status).toBe(404);
      return;
    }
    const none = await send(undefined);
    expect(none.status, 'no key').toBe(401);
    expect(none.body).toMatchObject({ error: { code: 'unauthorized' } });
    expect((await send(revoked)).status, 'a revoked key').toBe(401);
    expect((await send('tl_0000000000000000_' + 'A'.repeat(43))).status, 'an unknown key').toBe(401);

    const lacking = route.access === 'root' ? acme : withoutScope.get(route.access)!;
    const forbidden = await send(lacking);
    expect(forbidden.status, 'a key without the scope').toBe(403);
    expect(forbidden.body).toMatchObject({ error: { code: 'forbidden' } });

    const other = await send(beta);
    if (route.access === 'root') expect(other.status, "another tenant's key").toBe(403);
    else if ('owned' in route) expect(other.status, "another tenant's key").toBe(404);
    else expect(other.status, "another tenant's key").toBe(example.ok);

    const right = route.access === 'root' ? await send(ROOT) : await send(acme);
    expect(right.status, `the right key: ${JSON.stringify(right.body)}`).toBe(example.ok);
  });

  it('leaves health, readiness and metrics (behind their own token) open', async () => {
    expect((await fetch(`${stack.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${stack.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${stack.url}/metrics`)).status).toBe(401);
    const metrics = await fetch(`${stack.url}/metrics`, {
      headers: { authorization: 'Bearer metrics-token-0123456789' },
    });
    expect(metrics.status).toBe(200);
    // The token is compared in constant time (both sides hashed): a wrong one of any length, a
    // prefix or an extension of it, or another token is refused the same way.
    for (const wrong of [
      'metrics-token-0123456780',
      'metrics-token-012345678',
      'metrics-token-01234567890',
      ROOT,
    ]) {
      const refused = await fetch(`${stack.url}/metrics`, { headers: { authorization: `Bearer ${wrong}` } });
      expect(refused.status, wrong).toBe(401);
      expect(await refused.json()).toMatchObject({ error: { code: 'unauthorized' } });
    }
  });

  it('leaves the console open: its pages and assets hold no data (the page sends a key to /v1)', async () => {
    const paths = [
      CONSOLE_PAGES.runs,
      CONSOLE_PAGES.run.replace(':runId', randomUUID()),
      CONSOLE_PAGES.sessions,
      CONSOLE_PAGES.session.replace(':sessionKey', 'alice'),
      CONSOLE_PAGES.lessons.replace(':agentId', 'main'),
      CONSOLE_PAGES.schedules,
      CONSOLE_PAGES.triggers,
      CONSOLE_SCRIPT_PATH,
      CONSOLE_STYLE_PATH,
    ];
    for (const path of paths) expect((await fetch(`${stack.url}${path}`)).status, path).toBe(200);
    // What the console shows comes from /v1, which still asks for a key.
    expect((await fetch(`${stack.url}/v1/runs`)).status).toBe(401);
  });
});

describe('tenants', () => {
  it("keep two tenants' sessions of one name apart", async () => {
    const gamma = (await makeKey('delta', SCOPES)).key;
    const mine = `bob-${randomUUID().slice(0, 6)}`;
    expect(
      (await call('post', `/v1/sessions/${mine}/messages`, { key: acme, body: { text: 'from acme' } }))
        .status,
    ).toBe(202);
    expect(
      (await call('post', `/v1/sessions/${mine}/messages`, { key: gamma, body: { text: 'from delta' } }))
        .status,
    ).toBe(202);
    const transcript = async (key: string): Promise<string> =>
      (
        await fetch(`${stack.url}/v1/sessions/${mine}/transcript`, {
          headers: { authorization: `Bearer ${key}` },
        })
      ).text();
    const [ofAcme, ofDelta] = await Promise.all([transcript(acme), transcript(gamma)]);
    expect(ofAcme).toContain('from acme');
    expect(ofAcme).not.toContain('from delta');
    expect(ofDelta).toContain('from delta');
    expect(ofDelta).not.toContain('from acme');
    // Each sees the session under the name it gave it.
    const view = await call('get', `/v1/sessions/${mine}`, { key: gamma });
    expect(view.body.sessionKey).toBe(mine);
    // The same Idempotency-Key in two tenants makes two runs.
    const twice = async (key: string): Promise<string> => {
      const res = await fetch(`${stack.url}/v1/runs`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'idempotency-key': mine,
        },
        body: JSON.stringify({
          graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
        }),
      });
      return ((await res.json()) as { runId: string }).runId;
    };
    expect(await twice(acme)).not.toBe(await twice(gamma));
  });

  it('records who approved: the key and its tenant', async () => {
    const approver = await makeKey('acme', ['signals:write', 'runs:read']);
    const posted = await call('post', '/v1/runs', { key: acme, body: waitGraph('ship') });
    const runId = posted.body.runId as string;
    const sent = await call('post', `/v1/runs/${runId}/signals/ship`, {
      key: approver.key,
      body: { go: true },
    });
    expect(sent.status).toBe(202);
    expect(sent.body.decidedBy).toMatchObject({ keyId: approver.keyId, tenant: 'acme' });
    const doc = await settled(acme, runId);
    expect(doc.nodes.gate!.waits).toEqual([
      expect.objectContaining({
        signal: 'ship',
        decidedBy: expect.objectContaining({ keyId: approver.keyId }),
      }),
    ]);
  });

  it('lets only a key that may write runs wait with abortOnDisconnect', async () => {
    const reader = await makeKey('acme', ['runs:read']);
    const posted = await call('post', '/v1/runs', { key: acme, body: waitGraph('later') });
    const runId = posted.body.runId as string;
    const refused = await call('get', `/v1/runs/${runId}/wait?timeoutMs=0&abortOnDisconnect=true`, {
      key: reader.key,
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({
      error: { code: 'forbidden', message: expect.stringContaining('runs:write') },
    });
    expect((await call('get', `/v1/runs/${runId}/wait?timeoutMs=0`, { key: reader.key })).status).toBe(202);
    expect(
      (await call('get', `/v1/runs/${runId}/wait?timeoutMs=0&abortOnDisconnect=true`, { key: acme })).status,
    ).toBe(202);
    await call('post', `/v1/runs/${runId}/cancel`, { key: acme });
  });

  it('lets the root token act for a tenant, and delete one without a key left behind', async () => {
    const tenant = `gone-${randomUUID().slice(0, 6)}`;
    const key = (await makeKey(tenant, SCOPES)).key;
    const run = await call('post', '/v1/runs', {
      key,
      body: {
        graph: { nodes: [{ id: 'big', kind: 'tool', tool: 'json', args: { value: 'y'.repeat(3000) } }] },
      },
    });
    await settled(key, run.body.runId as string);
    await call('post', '/v1/sessions/carol/messages', { key, body: { text: 'hello' } });
    // Everything the message writes is written before the tenant goes: its reply is in the
    // transcript (a slow sense pool may answer the POST before it placed the message).
    await expect
      .poll(
        async () => {
          const res = await fetch(`${stack.url}/v1/sessions/carol/transcript`, {
            headers: { authorization: `Bearer ${key}` },
          });
          return res.status === 200 && (await res.text()).includes('"role":"assistant"');
        },
        { timeout: 20_000, interval: 50 },
      )
      .toBe(true);
    await laneIdle(stack, 'carol', 20_000, { authorization: `Bearer ${key}` });
    await call('put', '/v1/secrets/TOKEN', { key, body: { value: 'swordfish-swordfish', hosts: ['*'] } });
    const yearly = await call('post', '/v1/schedules', { key, body: { ...PAUSED_SCHEDULE, paused: false } });
    const scheduler = `schedule:${tenant}:${yearly.body.id as string}`;
    expect(await sense.getJobScheduler(scheduler)).toMatchObject({ pattern: '0 3 * * *' });
    await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'idempotency-key': 'k1',
      },
      body: JSON.stringify({
        graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
      }),
    });
    // The root token reads the tenant's run when it names the tenant, and not otherwise.
    const path = `/v1/runs/${run.body.runId as string}`;
    expect((await call('get', path, { key: ROOT, tenant })).status).toBe(200);
    expect((await call('get', path, { key: ROOT })).status).toBe(404);

    const tenantKeys = async (): Promise<string[]> => {
      const found: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${stack.prefix}:*`, 'COUNT', 1000);
        cursor = next;
        found.push(...keys.filter((k) => k.includes(tenant) || k.includes(run.body.runId as string)));
      } while (cursor !== '0');
      // BullMQ's job keys name runs by id; they are the queues', and their jobs find nothing.
      return found.filter((k) => !/:(plan|tool|sense|reflect):/.test(k));
    };
    expect((await tenantKeys()).length).toBeGreaterThan(3);
    const deleted = await call('delete', `/v1/tenants/${tenant}`, { key: ROOT });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ tenant, deleted: true, keys: 1 });
    expect(await tenantKeys()).toEqual([]);
    // The tenant's schedules fire no more: their job schedulers went with it.
    expect(await sense.getJobScheduler(scheduler)).toBeUndefined();
    expect((await call('get', '/v1/secrets', { key })).status).toBe(401);
    expect((await call('delete', '/v1/tenants/default', { key: ROOT })).status).toBe(409);
  });
});

describe('key lineage (issue 27: a key outlived its maker)', () => {
  const inMinutes = (minutes: number): string => new Date(Date.now() + minutes * 60_000).toISOString();

  /** A key `maker` mints; the answer must be 201. */
  async function mint(
    maker: string,
    body: { scopes: Scope[]; expiresAt?: string; name?: string },
  ): Promise<{ key: string; keyId: string; record: KeyRecord }> {
    const made = await call('post', '/v1/keys', { key: maker, body });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return {
      key: made.body.key as string,
      keyId: made.body.keyId as string,
      record: made.body as unknown as KeyRecord,
    };
  }

  /** What a key answers on a route every key here may use. */
  const statusOf = async (key: string): Promise<number> =>
    (await call('get', '/v1/runs?limit=1', { key })).status;

  const listed = async (key: string, createdBy: string): Promise<Answer> =>
    call('get', `/v1/keys?createdBy=${createdBy}`, { key });
  const idsOf = (answer: Answer): string[] => (answer.body.keys as KeyRecord[]).map((k) => k.keyId).sort();

  it('refuses an admin key expiring in 2 minutes a key without expiry, or one outliving it', async () => {
    const expiresAt = inMinutes(2);
    const made = await call('post', '/v1/keys', {
      key: ROOT,
      body: { tenant: 'acme', scopes: ['admin', 'runs:read'], expiresAt },
    });
    expect(made.status).toBe(201);
    const maker = made.body.key as string;
    expect(made.body.createdBy).toBe('root');

    const forever = await call('post', '/v1/keys', { key: maker, body: { scopes: ['admin', 'runs:read'] } });
    expect(forever.status).toBe(403);
    expect(forever.body).toMatchObject({
      error: {
        code: 'forbidden',
        issues: [{ path: 'expiresAt', message: expect.stringContaining(expiresAt) }],
      },
    });
    const later = await call('post', '/v1/keys', {
      key: maker,
      body: { scopes: ['runs:read'], expiresAt: inMinutes(60) },
    });
    expect(later.status).toBe(403);
    expect(later.body).toMatchObject({ error: { code: 'forbidden', issues: [{ path: 'expiresAt' }] } });
    // Nor a scope it lacks, nor another tenant.
    const wider = await call('post', '/v1/keys', {
      key: maker,
      body: { scopes: ['runs:write'], expiresAt: inMinutes(1) },
    });
    expect(wider.status).toBe(403);
    expect(wider.body).toMatchObject({ error: { code: 'forbidden', issues: [{ path: 'scopes' }] } });
    const elsewhere = await call('post', '/v1/keys', {
      key: maker,
      body: { tenant: 'beta', scopes: ['runs:read'], expiresAt: inMinutes(1) },
    });
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.body).toMatchObject({ error: { code: 'forbidden', issues: [{ path: 'tenant' }] } });
    // Nothing refused was made.
    expect(idsOf(await listed(ROOT, made.body.keyId as string))).toEqual([]);

    // Within its life, scopes and tenant it may: at its own expiry or before.
    const child = await mint(maker, { scopes: ['runs:read'], expiresAt });
    expect(child.record).toMatchObject({ createdBy: made.body.keyId, expiresAt, tenant: 'acme' });
    expect(await statusOf(child.key)).toBe(200);
    // A key without expiry still makes keys without one.
    const lasting = await mint(acme, { scopes: ['runs:read'] });
    expect(lasting.record.expiresAt).toBeUndefined();
  });

  it('revokes with a key every key it made, and every key those made; nothing else', async () => {
    const a = await mint(acme, { scopes: ['admin', 'runs:read'], name: 'a' });
    const b = await mint(a.key, { scopes: ['admin', 'runs:read'], name: 'b' });
    const c = await mint(b.key, { scopes: ['runs:read'], name: 'c' });
    const d = await mint(a.key, { scopes: ['runs:read'], name: 'd' });
    const sibling = await mint(acme, { scopes: ['runs:read'], name: 'sibling' });
    expect([b.record.createdBy, c.record.createdBy, d.record.createdBy]).toEqual([a.keyId, b.keyId, a.keyId]);
    for (const k of [a, b, c, d, sibling]) expect(await statusOf(k.key)).toBe(200);

    // Revoking the middle key takes what it made, not its maker or its siblings.
    expect((await call('delete', `/v1/keys/${b.keyId}`, { key: acme })).status).toBe(204);
    expect(await statusOf(b.key)).toBe(401);
    expect(await statusOf(c.key)).toBe(401);
    expect(await statusOf(a.key)).toBe(200);
    expect(await statusOf(d.key)).toBe(200);

    const e = await mint(a.key, { scopes: ['admin', 'runs:read'], name: 'e' });
    const f = await mint(e.key, { scopes: ['runs:read'], name: 'f' });
    expect((await call('delete', `/v1/keys/${a.keyId}`, { key: acme })).status).toBe(204);
    for (const k of [a, d, e, f]) {
      const answer = await call('get', '/v1/runs?limit=1', { key: k.key });
      expect(answer.status, k.record.keyId).toBe(401);
      expect(answer.body).toMatchObject({ error: { code: 'unauthorized' } });
    }
    expect(await statusOf(sibling.key)).toBe(200);
    expect(await statusOf(acme)).toBe(200);
    // The revoked keys are gone from the list, and no set of what they made is left in Redis.
    const ids = idsOf(await call('get', '/v1/keys', { key: acme }));
    for (const k of [a, b, c, d, e, f]) expect(ids).not.toContain(k.keyId);
    for (const k of [a, b, c, d, e, f]) {
      expect(await redis.keys(`${stack.prefix}:auth:key:${k.keyId}*`)).toEqual([]);
    }
  });

  it('lists exactly the keys a key made with ?createdBy=, and none of another tenant', async () => {
    const a = await mint(acme, { scopes: ['admin', 'runs:read'] });
    const b1 = await mint(a.key, { scopes: ['admin', 'runs:read'] });
    const b2 = await mint(a.key, { scopes: ['runs:read'] });
    const c = await mint(b1.key, { scopes: ['runs:read'] });
    // Keys that are not a's: its maker's others, and another tenant's.
    await mint(acme, { scopes: ['runs:read'] });
    await mint(beta, { scopes: ['runs:read'] });

    for (const viewer of [acme, a.key, ROOT]) {
      const children = await listed(viewer, a.keyId);
      expect(children.status).toBe(200);
      expect(idsOf(children)).toEqual([b1.keyId, b2.keyId].sort());
      expect((children.body.keys as KeyRecord[]).every((k) => k.createdBy === a.keyId)).toBe(true);
      expect(JSON.stringify(children.body)).not.toMatch(/tl_[0-9a-f]{16}_/);
    }
    expect(idsOf(await listed(acme, b1.keyId))).toEqual([c.keyId]);
    expect(idsOf(await listed(acme, c.keyId))).toEqual([]);
    // `root`: the keys the operator made, and not a key minted by a key.
    const byRoot = await listed(acme, 'root');
    expect(byRoot.status).toBe(200);
    // A key is `tl_<keyId>_<secret>`: acme's own key, made with the root token.
    expect(idsOf(byRoot)).toContain(acme.slice(3, 19));
    expect(idsOf(byRoot)).not.toContain(a.keyId);
    expect(
      (byRoot.body.keys as KeyRecord[]).every((k) => k.createdBy === 'root' && k.tenant === 'acme'),
    ).toBe(true);

    // Another tenant's admin key learns nothing of acme's keys through the filter.
    const foreign = await listed(beta, a.keyId);
    expect(foreign.status).toBe(200);
    expect(foreign.body.keys).toEqual([]);
    expect(idsOf(await listed(beta, b1.keyId))).toEqual([]);
    // Nor can it revoke them, or mint under them.
    expect((await call('delete', `/v1/keys/${a.keyId}`, { key: beta })).status).toBe(404);
    expect(await statusOf(b1.key)).toBe(200);

    const bad = await call('get', '/v1/keys?createdBy=someone', { key: acme });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      error: { code: 'invalid_request', issues: [{ path: 'query.createdBy' }] },
    });
    expect((await call('get', '/v1/keys?owner=x', { key: acme })).status).toBe(400);
  });

  it("removes each key's set of what it made when its tenant is deleted", async () => {
    const tenant = `lineage-${randomUUID().slice(0, 6)}`;
    const top = await makeKey(tenant, ['admin', 'runs:read']);
    const made = await mint(top.key, { scopes: ['admin', 'runs:read'] });
    await mint(made.key, { scopes: ['runs:read'] });
    expect(await redis.exists(`${stack.prefix}:auth:key:${top.keyId}:children`)).toBe(1);
    expect(await redis.exists(`${stack.prefix}:auth:key:${made.keyId}:children`)).toBe(1);
    expect((await call('delete', `/v1/tenants/${tenant}`, { key: ROOT })).body).toMatchObject({ keys: 3 });
    for (const id of [top.keyId, made.keyId]) {
      expect(await redis.keys(`${stack.prefix}:auth:key:${id}*`)).toEqual([]);
    }
  });
});
