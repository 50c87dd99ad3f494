/**
 * Secrets on a real Redis: written once over HTTP, encrypted at rest, filled into a tool call by
 * the worker at call time and found nowhere else — not in Redis (any key, any type), not in the run
 * document or its events, not in the logs. Credential headers in clear are refused; `Set-Cookie` is
 * not kept; outbound Idempotency-Keys say nothing about the run and differ per call.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { type RedisClient, connectRedis, whenReady } from '@tetraloop/core/runtime';
import { parseApiEnv } from '@tetraloop/api';
import { postRun, readEvents, runToEnd, startStack, testEnv, type Stack } from './support/stack.js';
import { keyspaceText } from './support/inspect.js';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

const TOKEN = `Bearer sk-live-${randomBytes(12).toString('hex')}`;
const BODY_SECRET = `pw-${randomBytes(12).toString('hex')}`;
const KEY = randomBytes(32).toString('base64');

let stack: Stack;
let server: ToolServer;
let model: ModelServer;
let redis: RedisClient;
const logs: string[] = [];

/**
 * An agent that asks for two calls in its first answer (and one naming a secret itself), one in
 * its second, then answers.
 */
function agentScript(r: ChatRequest): ScriptedReply {
  const turn = r.messages.filter((m) => m.role === 'assistant').length;
  const work = (node: string) => ({ name: 'http', arguments: { url: `${server.url}/work?node=${node}` } });
  if (turn === 0)
    return {
      content: '',
      toolCalls: [
        work('agent-a'),
        work('agent-b'),
        {
          name: 'http',
          arguments: {
            url: `${server.url}/echo?node=agent-secret`,
            headers: { Authorization: { $secret: 'API_TOKEN' } },
          },
        },
      ],
    };
  if (turn === 1) return { content: '', toolCalls: [work('agent-c')] };
  return { content: 'done' };
}

beforeAll(async () => {
  server = await startToolServer();
  model = await startModelServer({ script: agentScript });
  stack = await startStack({
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_SECRET_KEY: KEY,
      TETRALOOP_SECRET_MAX_BYTES: '256',
      TETRALOOP_SECRET_MAX_COUNT: '4',
      LOG_LEVEL: 'trace',
    },
    logDestination: new Writable({
      write(chunk: Buffer, _enc, done) {
        logs.push(chunk.toString());
        done();
      },
    }),
  });
  redis = connectRedis(stack.env.REDIS_URL!, 'client', 'tetraloop-test-secrets');
  // A client connection has no offline queue: used before it is ready, a command fails.
  await whenReady(redis);
});
afterAll(async () => {
  redis?.disconnect();
  await stack?.close();
  await server?.close();
  await model?.close();
});

async function request(
  url: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const res = await fetch(`${url}${path}`, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

const echo = (id: string, args: Record<string, unknown> = {}) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/echo?node=${id}`, ...args },
});

describe('the secret routes', () => {
  it('store a value write-only and list names only; the value is encrypted at rest', async () => {
    expect(
      (
        await request(stack.url, 'PUT', '/v1/secrets/API_TOKEN', {
          value: TOKEN,
          hosts: [new URL(server.url).host],
        })
      ).status,
    ).toBe(204);
    expect(
      (
        await request(stack.url, 'PUT', '/v1/secrets/BODY_SECRET', {
          value: BODY_SECRET,
          hosts: [new URL(server.url).host],
        })
      ).status,
    ).toBe(204);
    const listed = await request(stack.url, 'GET', '/v1/secrets');
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({
      secrets: [
        { name: 'API_TOKEN', updatedAt: expect.any(String), hosts: [new URL(server.url).host], tools: [] },
        { name: 'BODY_SECRET', updatedAt: expect.any(String), hosts: [new URL(server.url).host], tools: [] },
      ],
    });
    const raw = await redis.hget(`${stack.prefix}:secrets:{t:default}`, 'API_TOKEN');
    expect(raw).toMatch(/^v1\./);
    expect(raw).not.toContain(TOKEN);
    expect(raw).not.toContain(Buffer.from(TOKEN).toString('base64'));
  });

  it('refuse bad names and bodies with 400', async () => {
    const bad = await request(stack.url, 'PUT', '/v1/secrets/9-lives', { value: 'x' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { issues: [{ path: 'params.name' }] } });
    expect((await request(stack.url, 'PUT', '/v1/secrets/OK', { value: '' })).status).toBe(400);
    expect((await request(stack.url, 'PUT', '/v1/secrets/OK', { value: 'x', more: 1 })).status).toBe(400);
  });
});

describe('a run that uses secrets', () => {
  let doc: RunDocument;

  beforeAll(async () => {
    doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          echo('use', {
            method: 'POST',
            headers: { Authorization: { $secret: 'API_TOKEN' }, accept: 'application/json' },
            query: { q: 'plain' },
            json: { nested: [{ password: { $secret: 'BODY_SECRET' } }] },
          }),
          { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'use.output.body.headers' } } },
        ],
        edges: [['use', 'after']],
      },
    });
  });

  it('sends the real values, filled in by the worker at call time', () => {
    expect(doc.status).toBe('succeeded');
    const [hit] = server.hitsOf('use');
    expect(hit?.headers.authorization).toBe(TOKEN);
    expect(hit?.headers.accept).toBe('application/json');
  });

  it('keeps them out of the output (an echo of the request is masked) and drops Set-Cookie', () => {
    const output = (doc.nodes.use as { output: unknown }).output as {
      headers: Record<string, string>;
      body: Record<string, unknown>;
    };
    expect(JSON.stringify(output)).not.toContain(TOKEN);
    expect(JSON.stringify(output)).not.toContain(BODY_SECRET);
    expect((output.body.headers as Record<string, string>).authorization).toBe('[secret]');
    expect(Object.keys(output.headers).map((h) => h.toLowerCase())).not.toContain('set-cookie');
    expect(JSON.stringify(output)).not.toContain('s3ss10n-c00kie');
  });

  it('writes them nowhere: run document, events, the whole keyspace, the logs', async () => {
    const served = await request(stack.url, 'GET', `/v1/runs/${doc.runId}`);
    const events = await readEvents(stack.url, doc.runId);
    const keyspace = await keyspaceText(redis, stack.prefix);
    // The graph, with its references to the secrets, is there; their values are not.
    expect(keyspace).toMatch(/\$secret[^A-Z]+API_TOKEN/);
    const logText = logs.join('');
    expect(logText.length).toBeGreaterThan(0);
    for (const value of [TOKEN, BODY_SECRET]) {
      expect(JSON.stringify(served.body)).not.toContain(value);
      expect(JSON.stringify(events)).not.toContain(value);
      expect(keyspace).not.toContain(value);
      expect(logText).not.toContain(value);
    }
  });

  it('fails the node with a clear validation error when a secret is missing, leaking nothing', async () => {
    const failed = await runToEnd(stack.url, {
      graph: {
        nodes: [
          echo('missing', {
            headers: { Authorization: { $secret: 'API_TOKEN' }, 'X-Api-Key': { $secret: 'NOT_SET' } },
          }),
        ],
      },
    });
    expect(failed.status).toBe('failed');
    expect(failed.nodes.missing).toMatchObject({
      status: 'failed',
      error: { code: 'validation', message: expect.stringContaining('"NOT_SET"') },
    });
    expect(server.hitsOf('missing')).toHaveLength(0);
    expect(JSON.stringify(failed)).not.toContain(TOKEN);
  });
});

describe('credential headers in clear', () => {
  it('are refused with 400 naming the field and pointing to $secret', async () => {
    const posted = await postRun(stack.url, {
      graph: { nodes: [echo('clear', { headers: { authorization: 'Bearer in-clear', 'x-api-key': 'k' } })] },
    });
    expect(posted.status).toBe(400);
    const issues = (posted.body.error as { issues: { path: string; message: string }[] }).issues;
    expect(issues.map((i) => i.path)).toEqual([
      'graph.nodes.0.args.headers.authorization',
      'graph.nodes.0.args.headers.x-api-key',
    ]);
    expect(issues[0]!.message).toMatch(/\$secret/);
  });

  it('and a malformed $secret is refused at its exact path', async () => {
    const posted = await postRun(stack.url, {
      graph: { nodes: [echo('bad', { json: { a: [{ $secret: 'API_TOKEN', also: 1 }] } })] },
    });
    expect(posted.status).toBe(400);
    expect(posted.body.error).toMatchObject({ issues: [{ path: 'graph.nodes.0.args.json.a.0' }] });
  });
});

describe('outbound Idempotency-Key', () => {
  it('is the same on every retry of one call and reveals no run id', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'flaky',
            kind: 'tool',
            tool: 'http',
            args: { url: `${server.url}/flaky?node=idem-flaky&fail=1&status=503` },
          },
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    const keys = server.hitsOf('idem-flaky').map((h) => h.idempotencyKey);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(keys[0]).not.toContain(doc.runId);
    expect(keys[0]).not.toContain(doc.runId.replaceAll('-', ''));
  });

  it('differs across loop iterations and from other calls', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          { id: 'one', kind: 'tool', tool: 'http', args: { url: `${server.url}/work?node=idem-one` } },
          {
            id: 'loop',
            kind: 'loop',
            maxIterations: 3,
            body: { tool: 'http', args: { url: `${server.url}/work?node=idem-loop` } },
          },
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    const keys = [...server.hitsOf('idem-one'), ...server.hitsOf('idem-loop')].map((h) => h.idempotencyKey);
    expect(keys).toHaveLength(4);
    expect(new Set(keys).size).toBe(4);
    for (const k of keys) expect(k).not.toContain(doc.runId);
  });
});

describe('an agent', () => {
  it('gets a distinct Idempotency-Key for each tool call, and no secret for args the model wrote', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          { id: 'agent', kind: 'loop', maxIterations: 5, body: { agent: { prompt: 'go', tools: ['http'] } } },
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    const keys = ['agent-a', 'agent-b', 'agent-c'].map((n) => server.hitsOf(n)[0]?.idempotencyKey);
    expect(keys.every((k) => k !== undefined && /^[0-9a-f]{64}$/.test(k))).toBe(true);
    expect(new Set(keys).size).toBe(3);
    // The model's own {"$secret"} names a secret the agent was not granted: refused, nothing sent.
    expect(server.hitsOf('agent-secret')).toHaveLength(0);
    expect(JSON.stringify(doc)).not.toContain(TOKEN);
    const toolMessages = model.requests.at(-1)!.messages.filter((m) => m.role === 'tool');
    expect(toolMessages.some((m) => m.content?.includes('validation'))).toBe(true);
  });
});

describe('limits and deletion', () => {
  it('caps a value at TETRALOOP_SECRET_MAX_BYTES (413) and a tenant at TETRALOOP_SECRET_MAX_COUNT (409)', async () => {
    const big = await request(stack.url, 'PUT', '/v1/secrets/BIG', { value: 'x'.repeat(257), hosts: ['*'] });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ error: { code: 'secret_too_large' } });
    expect(JSON.stringify(big.body)).toContain('TETRALOOP_SECRET_MAX_BYTES');
    // Two are stored by now; the cap is four.
    for (const name of ['THIRD', 'FOURTH'])
      expect(
        (await request(stack.url, 'PUT', `/v1/secrets/${name}`, { value: 'v', hosts: ['*'] })).status,
      ).toBe(204);
    const over = await request(stack.url, 'PUT', '/v1/secrets/FIFTH', { value: 'v', hosts: ['*'] });
    expect(over.status).toBe(409);
    expect(over.body).toMatchObject({ error: { code: 'too_many_secrets' } });
    // Replacing one at the cap is fine.
    expect((await request(stack.url, 'PUT', '/v1/secrets/THIRD', { value: 'w', hosts: ['*'] })).status).toBe(
      204,
    );
  });

  it('deletes a secret (204), then knows it no more (404)', async () => {
    expect((await request(stack.url, 'DELETE', '/v1/secrets/FOURTH')).status).toBe(204);
    const again = await request(stack.url, 'DELETE', '/v1/secrets/FOURTH');
    expect(again.status).toBe(404);
    expect(again.body).toMatchObject({ error: { code: 'secret_not_found' } });
    const names = ((await request(stack.url, 'GET', '/v1/secrets')).body!.secrets as { name: string }[]).map(
      (s) => s.name,
    );
    expect(names).toEqual(['API_TOKEN', 'BODY_SECRET', 'THIRD']);
  });
});

describe('without TETRALOOP_SECRET_KEY', () => {
  let bare: Stack;
  beforeAll(async () => {
    bare = await startStack();
  });
  afterAll(async () => {
    await bare?.close();
  });

  it('the routes answer 409 naming the variable', async () => {
    const put = await request(bare.url, 'PUT', '/v1/secrets/API_TOKEN', { value: 'v', hosts: ['*'] });
    expect(put.status).toBe(409);
    expect(put.body).toMatchObject({
      error: { code: 'secrets_off', message: expect.stringContaining('TETRALOOP_SECRET_KEY') },
    });
    expect((await request(bare.url, 'GET', '/v1/secrets')).status).toBe(409);
  });

  it('a run that uses a secret fails its node with a validation error naming the variable', async () => {
    const doc = await runToEnd(bare.url, {
      graph: { nodes: [echo('nokey', { headers: { Authorization: { $secret: 'API_TOKEN' } } })] },
    });
    expect(doc.nodes.nokey).toMatchObject({
      status: 'failed',
      error: { code: 'validation', message: expect.stringContaining('TETRALOOP_SECRET_KEY') },
    });
    expect((doc.nodes.nokey as { error: { message: string } }).error.message).toContain(
      'args.headers.Authorization',
    );
    expect(server.hitsOf('nokey')).toHaveLength(0);
  });

  it('a key that is not 32 bytes stops the process at boot, naming the variable', () => {
    expect(() => parseApiEnv(testEnv({ TETRALOOP_SECRET_KEY: 'too-short' }))).toThrow(/TETRALOOP_SECRET_KEY/);
    expect(() =>
      parseApiEnv(testEnv({ TETRALOOP_SECRET_KEY: randomBytes(32).toString('hex') })),
    ).not.toThrow();
  });
});
