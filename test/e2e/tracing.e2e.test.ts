/**
 * One trace per run, across processes: a `tetraloop api` and a separate `tetraloop worker --pool
 * all`, both exporting over OTLP/HTTP to a receiver this test runs. The run is submitted with a W3C
 * `traceparent`; every span of it lands in that trace, under the run's `invoke_agent` span (the
 * OpenTelemetry GenAI conventions), which the request is the parent of: the passes of the run's
 * root job and every node are its children, each node linked to the node (or root job) that
 * released it, the tool calls (`execute_tool`) and model calls (`chat`) under their node, the HTTP
 * and Redis calls they make under them. The GenAI client metrics arrive at the same receiver. And
 * what the spans carry: no secret (from a query or a header), no URL query, no prompt, no
 * completion, no node output; a Redis span names its command and nothing else.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, inject, it, vi } from 'vitest';
import { freePort } from '@tetraloop/core/runtime';
import { startModelServer, type ModelServer } from '../support/model-server.js';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}
type Attributes = Record<string, string | number | boolean | undefined>;
interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  attributes: Attributes;
  /** The span ids of its links. */
  links: string[];
  /** Start and end, in ns since the epoch (as strings: they pass 2^53). */
  start: bigint;
  end: bigint;
  status: number;
  /** The span as received (attributes, events, status message, links), to search for values. */
  raw: string;
}

/** A histogram's data point as the receiver got it. */
interface ReceivedPoint {
  service: string;
  metric: string;
  unit: string;
  attributes: Attributes;
  count: number;
  min?: number;
  max?: number;
}

const spans: ReceivedSpan[] = [];
const points: ReceivedPoint[] = [];
let receiver: Server;
let receiverUrl: string;
let tools: ToolServer;
let model: ModelServer;
let api: Spawned;
let worker: Spawned;
let apiUrl: string;

/** A secret with characters a query encodes; `SECRET_CORE` is in every encoding of it. */
const SECRET_CORE = randomBytes(12).toString('hex');
const SECRET = `tok/${SECRET_CORE}+=`;
const PROMPT_MARK = `prompt-${randomBytes(8).toString('hex')}`;
const COMPLETION_MARK = `completion-${randomBytes(8).toString('hex')}`;
const SESSION_MARK = `session-${randomBytes(8).toString('hex')}`;

const valueOf = (v: OtlpValue): string | number | boolean | undefined =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue);

type OtlpAttributes = { key: string; value: OtlpValue }[];
const attributesOf = (list: OtlpAttributes | undefined): Attributes =>
  Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));
const serviceOf = (resource: { attributes: OtlpAttributes }): string =>
  String(valueOf(resource.attributes.find((a) => a.key === 'service.name')?.value ?? {}));

interface OtlpTraces {
  resourceSpans: {
    resource: { attributes: OtlpAttributes };
    scopeSpans: {
      spans: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        startTimeUnixNano: string;
        endTimeUnixNano: string;
        attributes?: OtlpAttributes;
        links?: { spanId: string }[];
        status?: { code?: number };
      }[];
    }[];
  }[];
}

interface OtlpMetrics {
  resourceMetrics: {
    resource: { attributes: OtlpAttributes };
    scopeMetrics: {
      metrics: {
        name: string;
        unit?: string;
        histogram?: {
          dataPoints: { attributes?: OtlpAttributes; count: string | number; min?: number; max?: number }[];
        };
      }[];
    }[];
  }[];
}

function keepSpans(request: OtlpTraces): void {
  for (const rs of request.resourceSpans) {
    const service = serviceOf(rs.resource);
    for (const ss of rs.scopeSpans)
      for (const s of ss.spans)
        spans.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          attributes: attributesOf(s.attributes),
          links: (s.links ?? []).map((l) => l.spanId),
          start: BigInt(s.startTimeUnixNano),
          end: BigInt(s.endTimeUnixNano),
          status: s.status?.code ?? 0,
          raw: JSON.stringify(s),
        });
  }
}

function keepPoints(request: OtlpMetrics): void {
  for (const rm of request.resourceMetrics) {
    const service = serviceOf(rm.resource);
    for (const sm of rm.scopeMetrics)
      for (const m of sm.metrics)
        for (const p of m.histogram?.dataPoints ?? [])
          points.push({
            service,
            metric: m.name,
            unit: m.unit ?? '',
            attributes: attributesOf(p.attributes),
            count: Number(p.count),
            ...(p.min !== undefined ? { min: p.min } : {}),
            ...(p.max !== undefined ? { max: p.max } : {}),
          });
  }
}

/** An OTLP/HTTP JSON receiver (`POST /v1/traces`, `POST /v1/metrics`), keeping what it is sent. */
async function startReceiver(): Promise<void> {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.url === '/v1/metrics') keepPoints(JSON.parse(body) as OtlpMetrics);
      else keepSpans(JSON.parse(body) as OtlpTraces);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  await startReceiver();
  tools = await startToolServer();
  model = await startModelServer({
    script: (r) => {
      const usage = { promptTokens: 12, completionTokens: 3 };
      // The session's agent: one call of the json tool, then its answer.
      const last = r.messages.at(-1);
      if (last?.role === 'user' && last.content?.includes(SESSION_MARK)) {
        const tools = (r.tools ?? []) as { function: { name: string } }[];
        const json = tools.find((t) => t.function.name.includes('json'))?.function.name ?? 'json';
        return { content: '', toolCalls: [{ name: json, arguments: { value: { ok: true } } }], usage };
      }
      return {
        content: r.messages.some((m) => m.content?.includes(PROMPT_MARK)) ? COMPLETION_MARK : 'traced',
        usage,
      };
    },
  });
  const port = await freePort();
  apiUrl = `http://127.0.0.1:${port}`;
  const env = {
    REDIS_URL: inject('redisUrl'),
    TETRALOOP_PREFIX: `test-${randomUUID()}`,
    TETRALOOP_AUTH: 'off',
    HOST: '127.0.0.1',
    PORT: String(port),
    TETRALOOP_HTTP_ALLOW_HOSTS: '127.0.0.1',
    OPENAI_BASE_URL: model.url,
    TETRALOOP_MODEL_MAX_RETRIES: '0',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_METRIC_EXPORT_INTERVAL: '200',
    TETRALOOP_SECRET_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'warn',
  };
  api = spawnTetraloop(['api'], env);
  worker = spawnTetraloop(['worker', '--pool', 'all'], env);
  await stderrMatches(worker, /worker ready/);
  // The API answers once it listens (it prints nothing at LOG_LEVEL warn): its health, polled.
  await vi.waitFor(
    async () => {
      const ok = await fetch(`${apiUrl}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (!ok) throw new Error(`the API did not start:\n${api.stderr()}`);
    },
    { timeout: 30_000, interval: 100 },
  );
}, 60_000);

afterAll(async () => {
  await Promise.all([api?.kill(), worker?.kill()]);
  await tools?.close();
  await model?.close();
  await new Promise((resolve) => receiver?.close(resolve));
});

it('makes one trace of a run, across the API and a worker process, whose span tree follows the graph', async () => {
  const traceId = randomBytes(16).toString('hex');
  const callerSpan = randomBytes(8).toString('hex');
  const graph = {
    nodes: [
      { id: 'a', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=a&ms=20` } },
      { id: 'b', kind: 'llm', prompt: 'say {{a.output.body.node}}' },
      { id: 'c', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=c&ms=20` } },
      {
        id: 'd',
        kind: 'tool',
        tool: 'json',
        args: { value: { b: '{{b.output.text}}', c: '{{c.output.status}}' } },
      },
    ],
    edges: [
      ['a', 'b'],
      ['a', 'c'],
      ['b', 'd'],
      ['c', 'd'],
    ],
  };
  const posted = await fetch(`${apiUrl}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${callerSpan}-01` },
    body: JSON.stringify({ graph }),
  });
  const answer = (await posted.json()) as { runId: string };
  expect(posted.status, JSON.stringify(answer)).toBe(202);
  const { runId } = answer;
  const done = await fetch(`${apiUrl}/v1/runs/${runId}/wait?timeoutMs=30000`).then(
    (r) => r.json() as Promise<{ status: string }>,
  );
  expect(done.status).toBe('succeeded');

  const ofTrace = (): ReceivedSpan[] => spans.filter((s) => s.traceId === traceId);
  const named = (name: string): ReceivedSpan | undefined => ofTrace().find((s) => s.name === name);
  // Spans arrive in batches: wait until the last node's and the run's finalize pass are in.
  await expect
    .poll(() => ['node d', 'run finalize'].every((n) => named(n) !== undefined), {
      timeout: 20_000,
      interval: 100,
    })
    .toBe(true);

  const trace = ofTrace();
  expect(new Set(trace.map((s) => s.service))).toEqual(new Set(['tetraloop-api', 'tetraloop-worker']));
  const byId = new Map(trace.map((s) => [s.spanId, s]));
  const parentOf = (s: ReceivedSpan): ReceivedSpan | undefined => byId.get(s.parentSpanId);

  // The request continues the caller's trace; the run's `invoke_agent` span continues the request
  // (the span the run was created in), from the run's acceptance to its settle.
  const request = trace.find((s) => s.service === 'tetraloop-api' && s.parentSpanId === callerSpan);
  expect(request?.attributes['http.request.method'] ?? request?.attributes['http.method']).toBe('POST');
  const runSpans = trace.filter((s) => s.name === 'invoke_agent main');
  expect(runSpans).toHaveLength(1);
  const invoke = runSpans[0]!;
  expect(parentOf(invoke)).toBe(request);
  expect(invoke.attributes).toMatchObject({
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.provider.name': 'openai',
    'gen_ai.agent.name': 'main',
    'gen_ai.agent.id': 'main',
    'tetraloop.run.id': runId,
    'tetraloop.run.status': 'succeeded',
  });
  // A run outside a session is no conversation.
  expect(invoke.attributes['gen_ai.conversation.id']).toBeUndefined();
  const start = named('run start')!;
  const finalize = named('run finalize')!;
  expect(start.service).toBe('tetraloop-worker');
  expect(start.attributes['tetraloop.run.id']).toBe(runId);
  // Recorded at settle, starting when the run was accepted: before its first pass began.
  expect(invoke.start <= start.start).toBe(true);
  expect(invoke.end >= start.end).toBe(true);
  for (const pass of [start, finalize]) expect(parentOf(pass)).toBe(invoke);

  // Each node is a child of the run's span, linked to what released it: a to the root job, b and
  // c to a, d to b or c.
  const node = (id: string): ReceivedSpan => named(`node ${id}`)!;
  for (const id of ['a', 'b', 'c', 'd']) {
    expect(parentOf(node(id)), `parent of node ${id}`).toBe(invoke);
    expect(node(id).attributes['tetraloop.node.status']).toBe('succeeded');
  }
  expect(node('a').links).toEqual([start.spanId]);
  expect(node('b').links).toEqual([node('a').spanId]);
  expect(node('c').links).toEqual([node('a').spanId]);
  expect([node('b').spanId, node('c').spanId]).toContain(node('d').links[0]);

  // A tool call under its node (`execute_tool`, GenAI conventions), naming tool, call and host,
  // with the HTTP call it made under it.
  const toolA = trace.find((s) => s.name === 'execute_tool http' && parentOf(s) === node('a'))!;
  expect(toolA.attributes).toMatchObject({
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': 'http',
    'gen_ai.tool.call.id': 'a:0',
    'gen_ai.tool.type': 'extension',
    'server.address': new URL(tools.url).host,
  });
  expect(trace.some((s) => parentOf(s) === toolA && s.attributes['http.request.method'] === 'GET')).toBe(
    true,
  );
  const toolD = trace.find((s) => s.name === 'execute_tool json' && parentOf(s) === node('d'))!;
  expect(toolD.attributes['gen_ai.tool.call.id']).toBe('d:0');

  // The model call, with the GenAI semantic conventions, under its node and so under the run.
  const chat = trace.find((s) => s.name.startsWith('chat ') && parentOf(s) === node('b'))!;
  expect(chat.attributes).toMatchObject({
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.usage.input_tokens': 12,
    'gen_ai.usage.output_tokens': 3,
  });
  const model = chat.attributes['gen_ai.request.model'];
  expect(model).toBeTypeOf('string');

  // The GenAI client metrics of that call, from the worker: tokens by type, and the duration.
  const point = (metric: string, attributes: Attributes): ReceivedPoint | undefined =>
    points.find(
      (p) =>
        p.service === 'tetraloop-worker' &&
        p.metric === metric &&
        Object.entries(attributes).every(([k, v]) => p.attributes[k] === v),
    );
  const ofCall = {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': model,
  };
  await expect
    .poll(
      () =>
        [
          point('gen_ai.client.token.usage', { ...ofCall, 'gen_ai.token.type': 'input' }),
          point('gen_ai.client.token.usage', { ...ofCall, 'gen_ai.token.type': 'output' }),
          point('gen_ai.client.operation.duration', ofCall),
        ].every((p) => p !== undefined),
      { timeout: 20_000, interval: 100 },
    )
    .toBe(true);
  // Every model call of this file answers 12 input and 3 output tokens.
  const input = point('gen_ai.client.token.usage', { ...ofCall, 'gen_ai.token.type': 'input' })!;
  expect(input).toMatchObject({ unit: '{token}', min: 12, max: 12 });
  expect(input.attributes['gen_ai.response.model']).toBeTypeOf('string');
  expect(point('gen_ai.client.token.usage', { ...ofCall, 'gen_ai.token.type': 'output' })).toMatchObject({
    min: 3,
    max: 3,
  });
  const duration = point('gen_ai.client.operation.duration', ofCall)!;
  expect(duration.unit).toBe('s');
  expect(duration.count).toBeGreaterThanOrEqual(1);
  expect(duration.attributes['error.type']).toBeUndefined();

  // Redis commands made for the run are in its trace (ioredis instrumentation).
  expect(
    trace.some((s) => s.attributes['db.system'] === 'redis' || s.attributes['db.system.name'] === 'redis'),
  ).toBe(true);
}, 60_000);

it("names a session run's conversation, and an agent's tool call by the model's call id", async () => {
  const traceId = randomBytes(16).toString('hex');
  const sessionId = `desk-${randomBytes(4).toString('hex')}`;
  const posted = await fetch(`${apiUrl}/v1/sessions/${sessionId}/messages`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
    },
    body: JSON.stringify({ text: `look it up ${SESSION_MARK}` }),
  });
  const answer = (await posted.json()) as { runId?: string };
  expect(posted.status, JSON.stringify(answer)).toBe(202);
  const runId = answer.runId!;
  const done = await fetch(`${apiUrl}/v1/runs/${runId}/wait?timeoutMs=30000`).then(
    (r) => r.json() as Promise<{ status: string }>,
  );
  expect(done.status).toBe('succeeded');
  const ofRun = (): ReceivedSpan[] =>
    spans.filter((s) => s.traceId === traceId || s.attributes['tetraloop.run.id'] === runId);
  await expect
    .poll(() => ofRun().some((s) => s.name.startsWith('invoke_agent ')), { timeout: 20_000, interval: 100 })
    .toBe(true);
  const invoke = ofRun().find((s) => s.name.startsWith('invoke_agent '))!;
  expect(invoke.attributes).toMatchObject({
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.conversation.id': sessionId,
    'tetraloop.run.id': runId,
  });
  // The agent's tool call and model calls: under its node, under the run's span. The run settles
  // inside its last node's job, so that node's span (the link between the call and the run's span)
  // ends and is exported after the run is already settled: wait for the whole chain.
  const trace = (): ReceivedSpan[] => spans.filter((s) => s.traceId === invoke.traceId);
  const descends = (s: ReceivedSpan): boolean => {
    const byId = new Map(trace().map((t) => [t.spanId, t]));
    for (let up = byId.get(s.parentSpanId); up; up = byId.get(up.parentSpanId))
      if (up === invoke) return true;
    return false;
  };
  const toolCalls = (): ReceivedSpan[] => trace().filter((s) => s.name.startsWith('execute_tool '));
  const chats = (): ReceivedSpan[] => trace().filter((s) => s.name.startsWith('chat '));
  await expect
    .poll(
      () =>
        toolCalls().length === 1 &&
        descends(toolCalls()[0]!) &&
        chats().length >= 2 &&
        chats().every(descends),
      {
        timeout: 20_000,
        interval: 100,
      },
    )
    .toBe(true);
  const toolCall = toolCalls()[0]!;
  expect(toolCall.attributes['gen_ai.tool.call.id']).toMatch(/^call_\d+$/);
  expect(toolCall.attributes['gen_ai.tool.type']).toBe('extension');
  expect(toolCalls()).toHaveLength(1);
}, 60_000);

it('marks a failed node with its error class', async () => {
  const traceId = randomBytes(16).toString('hex');
  const posted = await fetch(`${apiUrl}/v1/runs`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
    },
    body: JSON.stringify({
      graph: {
        nodes: [{ id: 'x', kind: 'tool', tool: 'http', args: { url: `${tools.url}/status/404?node=x` } }],
      },
    }),
  });
  const { runId } = (await posted.json()) as { runId: string };
  await fetch(`${apiUrl}/v1/runs/${runId}/wait?timeoutMs=30000`);
  await expect
    .poll(() => spans.find((s) => s.traceId === traceId && s.name === 'node x'), {
      timeout: 20_000,
      interval: 100,
    })
    .toBeDefined();
  const failed = spans.find((s) => s.traceId === traceId && s.name === 'node x')!;
  expect(failed.attributes['error.type']).toBe('validation');
  expect(failed.status).toBe(2);
}, 60_000);

it('exports no secret, URL query, prompt, completion or node output; Redis spans name their command only', async () => {
  const traceId = randomBytes(16).toString('hex');
  const traceparent = (): string => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
  const json = (body: unknown): RequestInit => ({
    headers: { 'content-type': 'application/json', traceparent: traceparent() },
    body: JSON.stringify(body),
  });
  // The secret, stored in this trace (a store that wants the hosts a secret may go to gets any).
  const putSecret = (body: unknown): Promise<{ status: number; text: string }> =>
    fetch(`${apiUrl}/v1/secrets/TRACE_TOKEN`, { method: 'PUT', ...json(body) }).then(async (r) => ({
      status: r.status,
      text: await r.text(),
    }));
  let put = await putSecret({ value: SECRET });
  if (put.status === 400 && put.text.includes('hosts'))
    put = await putSecret({ value: SECRET, hosts: ['*'] });
  expect(put.status, put.text).toBe(204);
  // Sent in a query and an Authorization header; a prompt and a completion to recognise; outputs.
  const graph = {
    nodes: [
      {
        id: 'call',
        kind: 'tool',
        tool: 'http',
        args: {
          url: `${tools.url}/echo?node=call`,
          query: { token: { $secret: 'TRACE_TOKEN' } },
          headers: { Authorization: { $secret: 'TRACE_TOKEN' } },
        },
      },
      { id: 'ask', kind: 'llm', prompt: `${PROMPT_MARK} {{call.output.body.query.node}}` },
      { id: 'keep', kind: 'tool', tool: 'json', args: { value: { said: '{{ask.output.text}}' } } },
    ],
    edges: [
      ['call', 'ask'],
      ['ask', 'keep'],
    ],
  };
  const posted = await fetch(`${apiUrl}/v1/runs`, { method: 'POST', ...json({ graph }) });
  const answer = (await posted.json()) as { runId: string };
  expect(posted.status, JSON.stringify(answer)).toBe(202);
  const done = await fetch(`${apiUrl}/v1/runs/${answer.runId}/wait?timeoutMs=30000`).then(
    (r) => r.json() as Promise<{ status: string; nodes: Record<string, { output?: unknown }> }>,
  );
  expect(done.status).toBe('succeeded');
  expect(JSON.stringify(done.nodes.keep?.output)).toContain(COMPLETION_MARK);
  expect(tools.hitsOf('call')[0]?.headers.authorization).toBe(SECRET);
  // An API request with the secret in its query.
  const health = await fetch(`${apiUrl}/healthz?token=${encodeURIComponent(SECRET)}`, {
    headers: { traceparent: traceparent() },
  });
  expect(health.ok).toBe(true);

  const ofTrace = (): ReceivedSpan[] => spans.filter((s) => s.traceId === traceId);
  const server = (path: string): ReceivedSpan | undefined =>
    ofTrace().find((s) => s.service === 'tetraloop-api' && s.attributes['url.path'] === path);
  await expect
    .poll(
      () =>
        ['node keep', 'run finalize'].every((n) => ofTrace().some((s) => s.name === n)) &&
        server('/healthz') !== undefined &&
        server('/v1/secrets/TRACE_TOKEN') !== undefined,
      { timeout: 20_000, interval: 100 },
    )
    .toBe(true);
  const trace = ofTrace();

  // Nothing any span of any trace carries holds the secret (in any encoding), the prompt, the
  // completion or the output made from it.
  const encoded = new URLSearchParams({ t: SECRET }).toString().slice('t='.length);
  for (const s of spans)
    for (const value of [
      SECRET_CORE,
      SECRET,
      encodeURIComponent(SECRET),
      encoded,
      PROMPT_MARK,
      COMPLETION_MARK,
    ])
      expect(s.raw, `span ${s.name} (${s.service})`).not.toContain(value);

  // URLs keep scheme, host, port and path: no query, no credentials, no fragment.
  for (const s of spans) {
    expect(s.attributes['url.query'], `span ${s.name}`).toBeUndefined();
    for (const key of ['url.full', 'http.url', 'http.target'])
      expect(String(s.attributes[key] ?? ''), `${key} of ${s.name}`).not.toMatch(/[?#@]/);
  }
  const byId = new Map(trace.map((s) => [s.spanId, s]));
  const toolCall = trace.find((s) => s.name === 'execute_tool http')!;
  const outgoing = trace.find((s) => byId.get(s.parentSpanId) === toolCall && s.attributes['url.full'])!;
  expect(outgoing.attributes).toMatchObject({ 'url.full': `${tools.url}/echo`, 'url.path': '/echo' });
  expect(server('/healthz')!.attributes['http.request.method']).toBe('GET');

  // The model call: its model and usage, never its messages.
  const chat = trace.find((s) => s.name.startsWith('chat '))!;
  expect(chat.attributes['gen_ai.usage.output_tokens']).toBe(3);
  expect(
    Object.keys(chat.attributes).filter((k) => /messages|instructions|prompt|completion/.test(k)),
  ).toEqual([]);

  // A Redis span: its command as name and statement, and the server it went to; no argument.
  const redis = trace.filter(
    (s) => s.attributes['db.system.name'] === 'redis' || s.attributes['db.system'] === 'redis',
  );
  expect(redis.map((s) => s.name)).toContain('evalsha');
  const allowed = new Set([
    'db.system.name',
    'db.system',
    'db.operation.name',
    'db.query.text',
    'db.statement',
    'server.address',
    'server.port',
  ]);
  for (const s of redis) {
    expect(
      Object.keys(s.attributes).filter((k) => !allowed.has(k)),
      `attributes of ${s.name}`,
    ).toEqual([]);
    for (const key of ['db.query.text', 'db.statement'])
      if (s.attributes[key] !== undefined) expect(s.attributes[key], `${key} of ${s.name}`).toBe(s.name);
    expect(String(s.attributes['db.operation.name'] ?? s.name)).toMatch(
      new RegExp(`^((MULTI|PIPELINE) )?${s.name}$`),
    );
  }
}, 60_000);
