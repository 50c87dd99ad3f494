/**
 * The OpenAPI contract on a running stack with auth on. The document served at `/openapi.json`
 * (open, like /healthz) is the one generated from the zod schemas, valid OpenAPI 3.1 to a
 * third-party validator (@readme/openapi-parser), and names every route the app registers — the
 * route table's and those outside `/v1` — with its method and the access it needs. Then every
 * operation is called at least once and each real answer is held to the document: its status
 * documented for the operation, its media type, its body valid against the documented schema
 * (ajv), the events of a stream against `RunEvent`, a transcript's lines against theirs.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { validate, compileErrors } from '@readme/openapi-parser';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DOCS_CONTENT_SECURITY_POLICY,
  DOCS_PATH,
  DOCS_SCRIPT_PATH,
  OPENAPI_PATH,
  ROUTES,
  openApiDocument,
  openApiPath,
  parseApiEnv,
  type RouteName,
} from '@tetraloop/api';
import {
  CONSOLE_CONTENT_SECURITY_POLICY,
  CONSOLE_PAGE,
  CONSOLE_PAGES,
  CONSOLE_SCRIPT_PATH,
  CONSOLE_STYLE_PATH,
} from '@tetraloop/console';
import { SCOPES, type RunDocument } from '@tetraloop/core/domain';
import { signWebhook } from '@tetraloop/core/webhooks';
import { Contract, readAnswer, type Answer } from './support/openapi-contract.js';
import { startModelServer, type ModelServer } from './support/model-server.js';
import { startStack, type Stack } from './support/stack.js';

const ROOT = 'openapi-root-token-0123456789-0123456789';
const METRICS = 'openapi-metrics-token-0123';
const WEBHOOK_SECRET = 'openapi-webhook-secret-0123';
let stack: Stack;
let model: ModelServer;
let contract: Contract;
/** A key of the tenant `acme` with every scope. */
let acme: string;

interface Call {
  readonly key?: string | null;
  readonly body?: unknown;
  /** The raw body, sent as it is (with `content-type: application/json`). */
  readonly raw?: string;
  readonly headers?: Record<string, string>;
}

/**
 * Each request on a connection of its own: validating the document holds this process (the API's
 * too) for seconds, after which a kept-alive connection may be reused just as the server's
 * keep-alive timer closes it.
 */
const ownConnections = new Agent({ pipelining: 0 });

/** One request, its answer checked against the document (and returned for the test's own checks). */
async function api(method: string, path: string, call: Call = {}): Promise<Answer> {
  const key = call.key === undefined ? acme : call.key;
  const body = call.raw ?? (call.body === undefined ? undefined : JSON.stringify(call.body));
  const res = await fetch(`${stack.url}${path}`, {
    method: method.toUpperCase(),
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...call.headers,
    },
    ...(body === undefined ? {} : { body }),
    dispatcher: ownConnections,
  } as unknown as RequestInit);
  const answer = await readAnswer(res);
  contract.check(method, path.split('?')[0]!, answer);
  return answer;
}

const wait = (runId: string, timeoutMs = 20_000): Promise<Answer> =>
  api('get', `/v1/runs/${runId}/wait?timeoutMs=${timeoutMs}`);

async function submit(body: unknown): Promise<string> {
  const answer = await api('post', '/v1/runs', { body });
  expect(answer.status).toBe(202);
  return (answer.body as { runId: string }).runId;
}

const waitGraph = (signal: string) => ({
  graph: { nodes: [{ id: 'gate', kind: 'wait', signal, timeoutSeconds: 600, acceptEarly: true }] },
});

beforeAll(async () => {
  model = await startModelServer({ script: () => ({ content: 'noted' }) });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_METRICS_TOKEN: METRICS,
      TETRALOOP_SECRET_KEY: 'b'.repeat(64),
      TETRALOOP_BLOB_MIN_BYTES: '1024',
      TETRALOOP_WEBHOOKS: JSON.stringify([{ name: 'github', secret: WEBHOOK_SECRET, tenant: 'acme' }]),
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
    },
  });
  const res = await fetch(`${stack.url}${OPENAPI_PATH}`);
  contract = new Contract((await res.json()) as Record<string, unknown>);
  const made = await api('post', '/v1/keys', { key: ROOT, body: { tenant: 'acme', scopes: SCOPES } });
  expect(made.status).toBe(201);
  acme = (made.body as { key: string }).key;
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await model?.close();
  await ownConnections.close();
});

describe('the document', () => {
  it('is served open, is the generated one, and is valid OpenAPI 3.1 to @readme/openapi-parser', async () => {
    const res = await fetch(`${stack.url}${OPENAPI_PATH}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const served = (await res.json()) as Record<string, unknown>;
    expect(served).toEqual(
      JSON.parse(
        JSON.stringify(openApiDocument({ maxWaitMs: parseApiEnv(stack.env).TETRALOOP_MAX_WAIT_MS })),
      ),
    );
    expect(served.openapi).toBe('3.1.0');
    // The validator dereferences what it is given: it gets a copy.
    const result = await validate(structuredClone(served) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(result.warnings).toEqual([]);
  });

  it('names every route of the route table with its method, operation id and access', () => {
    const paths = contract.document.paths as Record<string, Record<string, Record<string, unknown>>>;
    for (const [name, route] of Object.entries(ROUTES) as [RouteName, (typeof ROUTES)[RouteName]][]) {
      const op = paths[openApiPath(route.path)]?.[route.method];
      expect(op, `${name}: ${route.method.toUpperCase()} ${route.path}`).toBeDefined();
      expect(op!.operationId).toBe(name);
      expect(op!['x-tetraloop-access']).toBe(route.access);
      const security =
        route.access === 'signature'
          ? [{ webhookSignature: [] }]
          : route.access === 'root'
            ? [{ rootToken: [] }]
            : [{ apiKey: [route.access] }, { rootToken: [] }];
      expect(op!.security, name).toEqual(security);
      // Every path parameter of the route is documented as one.
      const params = (op!.parameters as { in: string; name: string }[]).filter((p) => p.in === 'path');
      expect(params.map((p) => p.name).sort()).toEqual(
        [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]).sort(),
      );
    }
  });

  it('names every route the app registers, and no route it does not', () => {
    const paths = contract.document.paths as Record<string, Record<string, unknown>>;
    // Bull Board's sign-in pages (a browser form, docs/operations.md) are the only ones left out.
    const registered = stack.api.routes
      .filter((r) => !r.path.startsWith('/admin/'))
      .map((r) => `${r.method} ${openApiPath(r.path)}`);
    const documented = Object.entries(paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method} ${path}`),
    );
    expect(registered.length).toBeGreaterThan(Object.keys(ROUTES).length);
    expect(registered.sort()).toEqual(documented.sort());
  });

  it('is strict enough to catch a drift: an unknown field, a missing one, an undocumented code', async () => {
    const runId = await submit(waitGraph('later'));
    const doc = (await api('get', `/v1/runs/${runId}`)).body as Record<string, unknown>;
    contract.expectComponent('RunDocument', doc);
    expect(() => contract.expectComponent('RunDocument', { ...doc, extra: 1 })).toThrow(/additional/);
    const { finishedAt: _, ...missing } = doc;
    expect(() => contract.expectComponent('RunDocument', missing)).toThrow(/finishedAt/);
    const refusal = { error: { code: 'teapot', message: 'no' } };
    const answer = {
      status: 404,
      headers: new Headers({ 'content-type': 'application/json' }),
      body: refusal,
    };
    expect(() =>
      contract.check('get', `/v1/runs/${runId}`, { ...answer, text: JSON.stringify(refusal) }),
    ).toThrow(/code/);
    expect(() =>
      contract.check('get', `/v1/runs/${runId}`, { ...answer, status: 418, text: JSON.stringify(refusal) }),
    ).toThrow(/not documented/);
    await api('post', `/v1/runs/${runId}/cancel`);
  });

  it('serves a reference page at /docs that loads nothing from anywhere else', async () => {
    const page = await api('get', DOCS_PATH, { key: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe(DOCS_CONTENT_SECURITY_POLICY);
    expect(DOCS_CONTENT_SECURITY_POLICY).not.toMatch(/https?:|\*/);
    const html = page.text;
    expect(html).toContain(`spec-url="${OPENAPI_PATH}"`);
    expect(html).toContain(`src="${DOCS_SCRIPT_PATH}"`);
    expect(html).not.toMatch(/https?:\/\//);
    const script = await api('get', DOCS_SCRIPT_PATH, { key: null });
    expect(script.status).toBe(200);
    const bundle = createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js');
    expect(script.text).toBe(readFileSync(bundle, 'utf8'));
  });

  it('serves the console open: one shell for every page, and its bundled script and style sheet', async () => {
    const pages = [
      CONSOLE_PAGES.runs,
      CONSOLE_PAGES.run.replace(':runId', '4c5403be-886b-4587-863f-2605f1e6eae1'),
      CONSOLE_PAGES.sessions,
      CONSOLE_PAGES.session.replace(':sessionKey', 'alice'),
      CONSOLE_PAGES.lessons.replace(':agentId', 'main'),
      CONSOLE_PAGES.schedules,
      CONSOLE_PAGES.triggers,
    ];
    for (const path of pages) {
      const page = await api('get', path, { key: null });
      expect(page.status, path).toBe(200);
      expect(page.headers.get('content-security-policy')).toBe(CONSOLE_CONTENT_SECURITY_POLICY);
      expect(page.text).toBe(CONSOLE_PAGE);
    }
    expect(CONSOLE_CONTENT_SECURITY_POLICY).not.toMatch(/https?:|\*|unsafe/);
    expect(CONSOLE_PAGE).not.toMatch(/https?:\/\//);
    const script = await api('get', CONSOLE_SCRIPT_PATH, { key: null });
    expect(script.status).toBe(200);
    expect(script.text).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    const style = await api('get', CONSOLE_STYLE_PATH, { key: null });
    expect(style.status).toBe(200);
    expect(style.text).not.toMatch(/@import|url\(/);
  });
});

describe('real answers match the documented schemas', () => {
  it('runs: submit, read, wait, events, cancel, resume, signal, feedback, blobs', async () => {
    const runId = await submit({
      graph: {
        nodes: [
          { id: 'big', kind: 'tool', tool: 'json', args: { value: 'x'.repeat(4000) } },
          {
            id: 'small',
            kind: 'tool',
            tool: 'json',
            args: { value: { $ref: 'big.output' }, pick: 'length' },
          },
        ],
        edges: [['big', 'small']],
      },
      input: { n: 1 },
      metadata: { team: 'a' },
    });
    const done = (await wait(runId)).body as RunDocument;
    expect(done.status).toBe('succeeded');
    expect((await api('get', `/v1/runs/${runId}`)).status).toBe(200);
    expect((await api('get', `/v1/runs/${runId}?expand=blobs`)).status).toBe(200);
    expect((await api('get', `/v1/runs/${runId}?expand=all`)).status).toBe(400);

    // A large output is a blob.
    const stub = (done.nodes.big as { output: { $blob: string } }).output;
    expect((await api('get', `/v1/blobs/${stub.$blob}`)).body).toBe('x'.repeat(4000));
    expect((await api('get', `/v1/blobs/${'0'.repeat(64)}`)).status).toBe(404);
    expect((await api('get', '/v1/blobs/SHA256')).status).toBe(400);

    // Its events, as server-sent events: each `data` a RunEvent, its id the event's seq.
    const events = await api('get', `/v1/runs/${runId}/events`);
    const blocks = (events.body as string).split('\n\n').filter((b) => b.startsWith('id: '));
    expect(blocks.length).toBeGreaterThan(3);
    for (const block of blocks) {
      const id = Number(/^id: (\d+)$/m.exec(block)![1]);
      const data = JSON.parse(/^data: (.*)$/m.exec(block)![1]!) as { seq: number; family: string };
      contract.expectComponent('RunEvent', data, `event ${id}`);
      expect(data.seq).toBe(id);
      expect(block).toContain(`event: ${data.family}`);
    }
    // After the last one: the stream of a settled run closes at once, with nothing.
    const after = await api('get', `/v1/runs/${runId}/events`, {
      headers: { 'last-event-id': String(blocks.length) },
    });
    expect(after.status).toBe(200);

    // Cancel a waiting run; a finished one cannot be.
    const waiting = await submit(waitGraph('never'));
    expect((await api('get', `/v1/runs/${waiting}/wait?timeoutMs=0`)).status).toBe(202);
    expect((await api('post', `/v1/runs/${waiting}/cancel`)).status).toBe(202);
    expect((await api('post', `/v1/runs/${runId}/cancel`)).status).toBe(409);

    // Signals: delivered, repeated, not awaited. A second gate keeps the run open until the
    // repeat has been answered: a repeat after the run ended answers 409 run_finished.
    const gated = await submit({
      graph: {
        nodes: [
          { id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 600, acceptEarly: true },
          { id: 'last', kind: 'wait', signal: 'done', timeoutSeconds: 600, acceptEarly: true },
        ],
        edges: [['gate', 'last']],
      },
    });
    expect((await api('post', `/v1/runs/${gated}/signals/go`, { body: { by: 'ana' } })).status).toBe(202);
    expect((await api('post', `/v1/runs/${gated}/signals/go`, { body: { by: 'bo' } })).status).toBe(200);
    expect((await api('post', `/v1/runs/${gated}/signals/other`)).status).toBe(409);
    expect((await api('post', `/v1/runs/${gated}/signals/${'!'.repeat(3)}`)).status).toBe(400);
    expect((await api('post', `/v1/runs/${gated}/signals/done`)).status).toBe(202);
    expect(((await wait(gated)).body as RunDocument).status).toBe('succeeded');

    // Resume a failed run; a succeeded one is not resumable.
    const failed = await submit({
      graph: {
        nodes: [
          {
            id: 'down',
            kind: 'tool',
            tool: 'http',
            retry: { network: 0 },
            args: { url: 'http://127.0.0.1:9/' },
          },
        ],
      },
    });
    expect(((await wait(failed)).body as RunDocument).status).toBe('failed');
    expect((await api('post', `/v1/runs/${failed}/resume`)).status).toBe(202);
    expect((await api('post', `/v1/runs/${runId}/resume`)).status).toBe(409);
    expect(((await wait(failed)).body as RunDocument).status).toBe('failed');

    // Search, explain, rerun from a node.
    expect((await api('get', '/v1/runs?limit=5')).status).toBe(200);
    expect((await api('get', '/v1/runs?status=finished')).status).toBe(400);
    expect((await api('get', `/v1/runs/${runId}/explain`)).status).toBe(200);
    // A map's item, and the errors of that route.
    const mapped = await submit({
      input: { list: [1, 2] },
      graph: {
        nodes: [
          {
            id: 'each',
            kind: 'map',
            over: { $ref: 'input.list' },
            node: { kind: 'tool', tool: 'json', args: { value: '{{item}}' } },
          },
        ],
      },
    });
    expect(((await wait(mapped)).body as RunDocument).status).toBe('succeeded');
    expect((await api('get', `/v1/runs/${mapped}/nodes/each/items/1`)).status).toBe(200);
    expect((await api('get', `/v1/runs/${mapped}/nodes/each/items/2`)).status).toBe(404);
    expect((await api('get', `/v1/runs/${mapped}/nodes/each/items/-1`)).status).toBe(400);
    const node = Object.keys(((await wait(runId)).body as RunDocument).nodes)[0]!;
    const rerun = await api('post', `/v1/runs/${runId}/rerun`, { body: { from: node } });
    expect(rerun.status).toBe(202);
    expect(((await wait((rerun.body as { runId: string }).runId)).body as RunDocument).status).toBe(
      'succeeded',
    );
    expect((await api('post', `/v1/runs/${runId}/rerun`, { body: { from: 'no-such-node' } })).status).toBe(
      400,
    );
    expect((await api('post', `/v1/runs/${waiting}/rerun`, { body: {} })).status).toBe(400);

    expect((await api('post', `/v1/runs/${runId}/feedback`, { body: { score: 1 } })).status).toBe(202);
    expect((await api('post', `/v1/runs/${runId}/feedback`, { body: { score: 3 } })).status).toBe(400);
  });

  it('refusals: an invalid graph, unknown runs, bad bodies, no key, a key without the scope', async () => {
    const invalid = await api('post', '/v1/runs', {
      body: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope' }], edges: [['a', 'b']] } },
    });
    expect(invalid.status).toBe(400);
    expect((invalid.body as { error: { code: string } }).error.code).toBe('invalid_graph');
    expect((await api('post', '/v1/runs', { body: { graph: {}, task: 'x' } })).status).toBe(400);
    expect((await api('post', '/v1/runs', { raw: '{"graph":' })).status).toBe(400);
    expect(
      (await api('post', '/v1/runs', { raw: `{"input":${'['.repeat(100)}${']'.repeat(100)}}` })).status,
    ).toBe(400);
    expect(
      (await api('post', '/v1/runs', { raw: 'graph', headers: { 'content-type': 'text/plain' } })).status,
    ).toBe(415);
    const unknown = '00000000-0000-4000-8000-000000000000';
    for (const path of [`/v1/runs/${unknown}`, `/v1/runs/${unknown}/wait`, `/v1/runs/${unknown}/events`]) {
      expect((await api('get', path)).status).toBe(404);
    }
    expect((await api('post', `/v1/runs/${unknown}/cancel`)).status).toBe(404);
    expect((await api('post', `/v1/runs/${unknown}/resume`)).status).toBe(404);
    expect((await api('post', `/v1/runs/${unknown}/signals/go`)).status).toBe(404);
    expect((await api('get', '/v1/runs/not-a-uuid')).status).toBe(404);
    expect((await api('get', `/v1/runs/${unknown}/wait?timeoutMs=-1`)).status).toBe(400);

    // Auth on: no key, an unknown key, a key without the scope, a root route.
    const none = await api('get', `/v1/runs/${unknown}`, { key: null });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="tetraloop"');
    expect(
      (await api('post', '/v1/runs', { key: `tl_${'0'.repeat(16)}_${'a'.repeat(43)}`, body: {} })).status,
    ).toBe(401);
    const reader = await api('post', '/v1/keys', { body: { scopes: ['runs:read'] } });
    const readOnly = (reader.body as { key: string }).key;
    expect((await api('post', '/v1/runs', { key: readOnly, body: waitGraph('x') })).status).toBe(403);
    expect((await api('get', '/v1/limits')).status).toBe(403);
    expect(
      (await api('get', '/v1/runs/x', { key: ROOT, headers: { 'x-tetraloop-tenant': 'NO' } })).status,
    ).toBe(400);
  });

  it('sessions and sources: message, lane, transcript, signed events', async () => {
    const sent = await api('post', '/v1/sessions/alice/messages', {
      body: { text: 'hello', mode: 'followup' },
    });
    expect(sent.status).toBe(202);
    const runId = (sent.body as { runId?: string }).runId;
    if (runId) expect((await wait(runId)).status).toBe(200);
    expect(
      (await api('post', '/v1/sessions/alice/messages', { body: { text: '/queue steer' } })).status,
    ).toBe(202);
    expect((await api('post', '/v1/sessions/alice/messages', { body: { text: '' } })).status).toBe(400);
    expect((await api('get', '/v1/sessions?limit=10')).status).toBe(200);
    expect((await api('get', '/v1/sessions?cursor=nope')).status).toBe(400);
    expect((await api('get', '/v1/sessions/alice')).status).toBe(200);
    expect((await api('get', '/v1/sessions/nobody')).status).toBe(404);
    expect((await api('get', '/v1/sessions/bad key!')).status).toBe(400);

    // AG-UI: the session run as AG-UI events, one JSON object per `data:` frame, until RUN_FINISHED.
    const agui = await api('post', '/v1/agui/main', {
      body: { threadId: 'agui', runId: 'r1', messages: [{ id: 'm1', role: 'user', content: 'hello' }] },
    });
    expect(agui.status).toBe(200);
    const frames = (agui.body as string)
      .split('\n\n')
      .filter((b) => b.startsWith('data: '))
      .map((b) => JSON.parse(b.slice('data: '.length)) as { type: string });
    expect([frames[0]?.type, frames.at(-1)?.type]).toEqual(['RUN_STARTED', 'RUN_FINISHED']);
    expect(
      (await api('post', '/v1/agui/main', { body: { threadId: 'bad key!', runId: 'r', messages: [] } }))
        .status,
    ).toBe(400);

    // A transcript page: JSON lines, a header then entries.
    const transcript = await api('get', '/v1/sessions/alice/transcript?limit=50');
    expect(transcript.status).toBe(200);
    const [header, ...entries] = (transcript.body as string)
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as unknown);
    contract.expectComponent('TranscriptHeader', header);
    expect(entries.length).toBeGreaterThan(0);
    for (const entry of entries) contract.expectComponent('TranscriptEntry', entry);
    expect((await api('get', '/v1/sessions/alice/transcript?limit=0')).status).toBe(400);

    // A signed webhook event; unsigned, unknown source.
    const raw = JSON.stringify({
      eventId: 'e-1',
      type: 'push',
      sessionKey: 'alice',
      payload: { ref: 'main' },
    });
    const signed = await api('post', '/v1/sources/github/events', {
      key: null,
      raw,
      headers: { 'x-tetraloop-signature': signWebhook(WEBHOOK_SECRET, raw) },
    });
    expect(signed.status).toBe(202);
    expect((await api('post', '/v1/sources/github/events', { key: null, raw })).status).toBe(401);
    expect((await api('post', '/v1/sources/gitlab/events', { key: null, raw })).status).toBe(404);
    expect((await api('get', '/v1/sources')).status).toBe(200);
  });

  it('keys, tenants, secrets, limits, memory', async () => {
    const made = await api('post', '/v1/keys', { body: { scopes: ['runs:read'], name: 'ci' } });
    expect(made.status).toBe(201);
    expect((await api('get', '/v1/keys')).status).toBe(200);
    expect((await api('get', '/v1/keys', { key: ROOT })).status).toBe(200);
    expect((await api('get', `/v1/keys?createdBy=${acme.slice(3, 19)}`)).status).toBe(200);
    expect((await api('get', '/v1/keys?createdBy=nobody')).status).toBe(400);
    expect((await api('delete', `/v1/keys/${(made.body as { keyId: string }).keyId}`)).status).toBe(204);
    expect((await api('delete', `/v1/keys/${'f'.repeat(16)}`)).status).toBe(404);
    expect((await api('post', '/v1/keys', { body: { scopes: [] } })).status).toBe(400);
    expect((await api('post', '/v1/keys', { body: { scopes: ['runs:read'], tenant: 'beta' } })).status).toBe(
      403,
    );
    await api('post', '/v1/keys', { key: ROOT, body: { tenant: 'gone', scopes: ['runs:read'] } });
    expect((await api('delete', '/v1/tenants/gone', { key: ROOT })).status).toBe(200);
    expect((await api('delete', '/v1/tenants/default', { key: ROOT })).status).toBe(409);
    expect((await api('delete', '/v1/tenants/NO', { key: ROOT })).status).toBe(400);

    expect(
      (await api('put', '/v1/secrets/TOKEN', { body: { value: 'hunter2-hunter2', hosts: ['*'] } })).status,
    ).toBe(204);
    expect((await api('put', '/v1/secrets/TOKEN', { body: { value: '' } })).status).toBe(400);
    expect((await api('get', '/v1/secrets')).status).toBe(200);
    expect((await api('delete', '/v1/secrets/TOKEN')).status).toBe(204);
    expect((await api('delete', '/v1/secrets/TOKEN')).status).toBe(404);

    const hook = await api('post', '/v1/webhooks', { body: { url: 'https://example.test/hook' } });
    expect(hook.status).toBe(201);
    const hookId = (hook.body as { id: string }).id;
    expect((await api('post', '/v1/webhooks', { body: { url: 'ftp://example.test' } })).status).toBe(400);
    expect((await api('get', '/v1/webhooks')).status).toBe(200);
    expect((await api('get', `/v1/webhooks/${hookId}/deliveries`)).status).toBe(200);
    expect((await api('post', '/v1/webhooks/secret')).status).toBe(201);
    expect((await api('delete', `/v1/webhooks/${hookId}`)).status).toBe(204);
    expect((await api('delete', `/v1/webhooks/${hookId}`)).status).toBe(404);

    const schedule = await api('post', '/v1/schedules', {
      body: {
        name: 'openapi',
        cron: '0 3 * * *',
        paused: true,
        request: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
      },
    });
    expect(schedule.status).toBe(201);
    const scheduleId = (schedule.body as { id: string }).id;
    expect((await api('post', '/v1/schedules', { body: { name: 'x', request: {} } })).status).toBe(400);
    expect((await api('get', '/v1/schedules')).status).toBe(200);
    expect((await api('get', `/v1/schedules/${scheduleId}`)).status).toBe(200);
    expect((await api('patch', `/v1/schedules/${scheduleId}`, { body: { name: 'renamed' } })).status).toBe(
      200,
    );
    expect((await api('post', `/v1/schedules/${scheduleId}/trigger`)).status).toBe(202);
    expect((await api('delete', `/v1/schedules/${scheduleId}`)).status).toBe(204);
    expect((await api('get', `/v1/schedules/${scheduleId}`)).status).toBe(404);

    const madeTrigger = await api('post', '/v1/triggers', {
      body: {
        event: 'openapi.test',
        request: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
      },
    });
    expect(madeTrigger.status).toBe(201);
    const triggerId = (madeTrigger.body as { id: string }).id;
    expect((await api('post', '/v1/triggers', { body: { event: 'openapi.test', request: {} } })).status).toBe(
      400,
    );
    expect((await api('get', '/v1/triggers')).status).toBe(200);
    expect((await api('get', `/v1/triggers/${triggerId}`)).status).toBe(200);
    expect((await api('post', '/v1/events', { body: { name: 'openapi.other', id: 'e-1' } })).status).toBe(
      202,
    );
    expect((await api('post', '/v1/events', { body: { name: 'not a name' } })).status).toBe(400);
    expect((await api('delete', `/v1/triggers/${triggerId}`)).status).toBe(204);
    expect((await api('get', `/v1/triggers/${triggerId}`)).status).toBe(404);

    const limits = [{ name: 'hosts', key: 'host', concurrency: 4 }];
    expect((await api('get', '/v1/limits', { key: ROOT })).status).toBe(200);
    expect((await api('put', '/v1/limits', { key: ROOT, body: { limits } })).status).toBe(200);
    expect((await api('put', '/v1/limits', { key: ROOT, body: limits })).status).toBe(200);
    expect((await api('put', '/v1/limits', { key: ROOT, body: [{ name: 'x' }] })).status).toBe(400);
    expect((await api('delete', '/v1/limits', { key: ROOT })).status).toBe(200);
    expect((await api('get', '/v1/usage')).status).toBe(200);
    expect((await api('get', '/v1/usage?day=2026-02-30')).status).toBe(400);
    expect((await api('get', '/v1/tools')).status).toBe(200);

    expect((await api('post', '/v1/agents/main/reflect')).status).toBe(202);
    expect((await api('get', '/v1/agents/main/lessons')).status).toBe(200);
    expect((await api('get', '/v1/agents/main/lessons?status=gone')).status).toBe(400);
    expect((await api('get', '/v1/agents/main/memory?limit=5')).status).toBe(200);
    expect(
      (await api('patch', `/v1/lessons/main.${'a'.repeat(12)}`, { body: { status: 'retired' } })).status,
    ).toBe(404);
    expect((await api('patch', '/v1/lessons/nope', { body: { status: 'retired' } })).status).toBe(400);
  });

  it('MCP: a request answered as an event stream, a notification accepted, GET refused', async () => {
    const accept = { accept: 'application/json, text/event-stream' };
    const ping = await api('post', '/mcp', {
      body: { jsonrpc: '2.0', id: 1, method: 'ping' },
      headers: accept,
    });
    expect(ping.status).toBe(200);
    expect(ping.text).toContain('"result":{}');
    const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
    expect((await api('post', '/mcp', { body: initialized, headers: accept })).status).toBe(202);
    expect((await api('post', '/mcp', { body: { id: 1 }, headers: accept })).status).toBe(400);
    expect((await api('post', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'ping' } })).status).toBe(406);
    expect((await api('get', '/mcp')).status).toBe(405);
  });

  it('A2A: the open card, an agent’s card, a JSON-RPC call', async () => {
    const v1 = { 'a2a-version': '1.0' };
    expect((await api('get', '/.well-known/agent-card.json', { key: null, headers: v1 })).status).toBe(200);
    expect((await api('get', '/v1/a2a/main/.well-known/agent-card.json', { headers: v1 })).status).toBe(200);
    expect((await api('get', '/v1/a2a/no%20agent/.well-known/agent-card.json')).status).toBe(400);
    const runId = await submit({
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
    });
    const got = await api('post', '/v1/a2a/main', {
      headers: v1,
      body: { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: runId } },
    });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ jsonrpc: '2.0', id: 1, result: { id: runId } });
  });

  it('LangGraph’s Agent Protocol: assistants, threads, runs, the store', async () => {
    const run = (text: string) => ({
      assistant_id: 'main',
      input: { messages: [{ role: 'user', content: text }] },
      multitask_strategy: 'enqueue',
      stream_mode: ['values', 'updates', 'messages', 'messages-tuple', 'events'],
    });
    expect((await api('post', '/langgraph/assistants/search', { body: {} })).status).toBe(200);
    expect((await api('get', '/langgraph/assistants/main')).status).toBe(200);
    expect((await api('get', '/langgraph/assistants/nobody')).status).toBe(404);
    expect((await api('post', '/langgraph/assistants/main/versions', { body: {} })).status).toBe(200);
    const made = await api('post', '/langgraph/threads', { body: { metadata: { team: 'a' } } });
    expect(made.status).toBe(200);
    const thread = (made.body as { thread_id: string }).thread_id;
    expect((await api('post', '/langgraph/threads', { body: { thread_id: thread } })).status).toBe(409);
    expect((await api('post', '/langgraph/threads/search', { body: {} })).status).toBe(200);
    expect((await api('get', `/langgraph/threads/${thread}`)).status).toBe(200);
    expect((await api('get', '/langgraph/threads/nobody')).status).toBe(404);
    const streamed = await api('post', `/langgraph/threads/${thread}/runs/stream`, { body: run('one') });
    expect(streamed.status).toBe(200);
    const runId = /"run_id":"([^"]+)"/.exec(streamed.text)![1]!;
    expect((await api('post', `/langgraph/threads/${thread}/runs/wait`, { body: run('two') })).status).toBe(
      200,
    );
    const created = await api('post', `/langgraph/threads/${thread}/runs`, { body: run('three') });
    expect(created.status).toBe(200);
    const third = (created.body as { run_id: string }).run_id;
    expect((await api('get', `/langgraph/threads/${thread}/runs/${third}/join`)).status).toBe(200);
    expect((await api('get', `/langgraph/threads/${thread}/runs/${runId}`)).status).toBe(200);
    expect((await api('get', `/langgraph/threads/${thread}/runs/${runId}/stream`)).status).toBe(200);
    expect((await api('post', `/langgraph/threads/${thread}/runs/${third}/cancel`)).status).toBe(409);
    expect((await api('get', `/langgraph/threads/${thread}/state`)).status).toBe(200);
    expect((await api('post', `/langgraph/threads/${thread}/history`, { body: {} })).status).toBe(200);
    expect(
      (await api('post', `/langgraph/threads/${thread}/runs`, { body: { ...run('x'), command: {} } })).status,
    ).toBe(400);
    expect((await api('post', '/langgraph/runs', { body: run('alone') })).status).toBe(200);
    expect((await api('post', '/langgraph/runs/stream', { body: run('alone') })).status).toBe(200);
    expect((await api('post', '/langgraph/runs/wait', { body: run('alone') })).status).toBe(200);
    expect((await api('delete', `/langgraph/threads/${thread}`)).status).toBe(204);

    const item = { namespace: ['docs'], key: 'k', value: { v: 1 } };
    expect((await api('put', '/langgraph/store/items', { body: item })).status).toBe(204);
    expect((await api('get', '/langgraph/store/items?namespace=docs&key=k')).status).toBe(200);
    expect((await api('get', '/langgraph/store/items?namespace=docs&key=none')).status).toBe(404);
    expect((await api('post', '/langgraph/store/items/search', { body: {} })).status).toBe(200);
    expect((await api('post', '/langgraph/store/namespaces', { body: {} })).status).toBe(200);
    expect((await api('delete', '/langgraph/store/items', { body: item })).status).toBe(204);
    expect(
      (await api('put', '/langgraph/store/items', { body: { ...item, namespace: ['a.b'] } })).status,
    ).toBe(400);
  });

  it('the open routes: health, readiness, metrics, the document', async () => {
    expect((await api('get', '/healthz', { key: null })).status).toBe(200);
    expect((await api('get', '/readyz', { key: null })).status).toBe(200);
    expect((await api('get', '/metrics', { key: null })).status).toBe(401);
    expect((await api('get', '/metrics', { key: METRICS })).status).toBe(200);
    expect((await api('get', OPENAPI_PATH, { key: null })).status).toBe(200);
  });

  afterAll(() => {
    // Every operation of the document answered at least once, each answer held to the document.
    const answered = new Set([...contract.seen].map((s) => s.split(' ')[0]));
    expect(contract.operationIds().filter((id) => !answered.has(id))).toEqual([]);
  });
});
