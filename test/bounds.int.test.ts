/**
 * Limits against abuse and faults, on a real Redis with real loopback servers: response byte caps
 * (http tool and polled sources), no redirects and the egress policy for sources, linear-time
 * schema patterns, numbers from outside (Retry-After, JSON depth, collected messages, refused
 * addresses), and usage across a resume.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { RETRY_AFTER_CEILING_MS } from '@tetraloop/core/errors';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import {
  followJobEvents,
  laneIdle,
  post,
  postRun,
  runToEnd,
  startStack,
  waitFor,
  type JobEvents,
  type Stack,
} from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

const MAX_BYTES = 65_536;
const HUGE = 32 * 1024 * 1024;

let stack: Stack;
let model: ModelServer;
let tools: ToolServer;
let sense: JobEvents;
let answer: (request: ChatRequest) => ScriptedReply | Promise<ScriptedReply>;
const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';

beforeAll(async () => {
  tools = await startToolServer();
  answer = (r) => ({ content: `echo: ${lastUser(r).slice(0, 40)}` });
  model = await startModelServer({ script: (r) => answer(r) });
  const prefix = `test-${randomUUID()}`;
  const port = new URL(tools.url).port;
  const source = (name: string, url: string) => ({ name, url, intervalMs: 200, timeoutMs: 5000 });
  // Followed from before the pools start, so no poll of the sources below can be missed.
  sense = await followJobEvents({ url: '', prefix, env: { REDIS_URL: inject('redisUrl') } }, ['sense']);
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      TETRALOOP_PREFIX: prefix,
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_HTTP_MAX_BYTES: String(MAX_BYTES),
      TETRALOOP_RETRY_AFTER_MAX_MS: '100',
      TETRALOOP_COLLECT_DEBOUNCE_MS: '100',
      TETRALOOP_WORKSPACE_DIR: new URL('./fixtures/workspace', import.meta.url).pathname,
      TETRALOOP_SOURCES: JSON.stringify([
        source('big', `${tools.url}/bytes?node=src-big&n=${HUGE}`),
        source('bounce', `${tools.url}/redirect?node=src-bounce&to=${tools.url}/count?node=src-target`),
        // `localhost` is not allowlisted (only 127.0.0.1 is): it resolves to a private address.
        source('private', `http://localhost:${port}/count?node=src-private`),
      ]),
    },
  });
});
afterAll(async () => {
  sense?.close();
  await stack?.close();
  await model?.close();
  await tools?.close();
});

const call = (id: string, path: string, extra: object = {}) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${tools.url}${path}${path.includes('?') ? '&' : '?'}node=${id}` },
  ...extra,
});

describe('the http tool', () => {
  it('streams a response under TETRALOOP_HTTP_MAX_BYTES and refuses a longer one as response_too_large', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          call('fits', `/bytes?n=${MAX_BYTES - 1024}`),
          // Both fail; without "continue" the first failure would cancel the other.
          call('endless', `/bytes?n=${HUGE}`, { onError: 'continue' }),
          call('declared', `/bytes?n=${HUGE}&declare=1`, { onError: 'continue' }),
        ],
      },
    });
    expect(doc.nodes.fits).toMatchObject({ status: 'succeeded' });
    for (const id of ['endless', 'declared']) {
      expect(doc.nodes[id], id).toMatchObject({
        status: 'failed',
        error: { code: 'validation', reason: 'response_too_large' },
      });
    }
    // The body was abandoned, not read to its end.
    expect(tools.hitsOf('endless')[0]!.sent).toBeLessThan(HUGE);
  });

  it('answers a refused address without the address it resolved to', async () => {
    const port = new URL(tools.url).port;
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [{ id: 'inside', kind: 'tool', tool: 'http', args: { url: `http://localhost:${port}/work` } }],
      },
    });
    expect(doc.nodes.inside).toMatchObject({
      status: 'failed',
      error: {
        code: 'validation',
        reason: 'egress_refused',
        message: expect.stringContaining('private address'),
      },
    });
    expect(JSON.stringify(doc)).not.toMatch(/127\.0\.0\.1|::1/);
  });

  it('refuses the IPv4-compatible loopback [::127.0.0.1] as egress_refused, not on the network', async () => {
    const port = new URL(tools.url).port;
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'compat',
            kind: 'tool',
            tool: 'http',
            retry: { network: 0 },
            args: { url: `http://[::127.0.0.1]:${port}/work?node=compat` },
          },
        ],
      },
    });
    expect(doc.nodes.compat).toMatchObject({
      status: 'failed',
      error: { code: 'validation', reason: 'egress_refused' },
    });
    expect(tools.hitsOf('compat')).toHaveLength(0);
  });
});

describe('numbers from outside', () => {
  it('cuts Retry-After: 1e300 to a ceiling: the node is retried and fails classified', async () => {
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [call('later', '/retry-after?value=1e300', { retry: { rate_limited: 1 } })] },
    });
    expect(doc.status).toBe('failed');
    expect(doc.nodes.later).toMatchObject({ status: 'failed', error: { code: 'rate_limited', status: 429 } });
    expect(doc.nodes.later!.attempts.map((a) => a.error?.code)).toEqual(['rate_limited', 'rate_limited']);
    expect(doc.nodes.later!.attempts[0]!.error).toMatchObject({ retryAfterMs: RETRY_AFTER_CEILING_MS });
    expect(tools.hitsOf('later')).toHaveLength(2);
  });

  it('cuts a model server Retry-After the same way', async () => {
    let calls = 0;
    answer = () =>
      calls++ === 0
        ? { status: 429, headers: { 'retry-after': '1e300' }, error: { message: 'slow down' } }
        : { content: 'fine' };
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 'm', kind: 'llm', prompt: 'hi', retry: { rate_limited: 1 } }] },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.m!.attempts.map((a) => a.error?.code ?? 'ok')).toEqual(['rate_limited', 'ok']);
  });

  it('refuses a body nested deeper than 64 levels with 400 json_too_deep, before parsing', async () => {
    const deep = 200_000;
    const res = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"graph":{"nodes":[]},"input":${'['.repeat(deep)}${']'.repeat(deep)}}`,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { code: 'json_too_deep', message: expect.stringContaining('64') },
    });
    // At the limit, the body is a run like any other.
    let input: unknown = 'leaf';
    for (let i = 0; i < 60; i++) input = [input];
    const ok = await postRun(stack.url, { graph: { nodes: [call('shallow', '/work')] }, input });
    expect(ok.status).toBe(202);
  });

  it('refuses JSON in UTF-16 with 415 unsupported_charset: its bytes cannot hide a deep body', async () => {
    // U+2200 is `00 22` in UTF-16LE: read as UTF-8 bytes, a quote opens a string that never closes.
    // Before: depth 3000 was stored as the run's input, depth 200,000 answered 500 (RangeError).
    const graph = JSON.stringify({ nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] });
    for (const deep of [3000, 200_000]) {
      const text = `{"graph":${graph},"input":["\u2200",${'['.repeat(deep)}${']'.repeat(deep)}]}`;
      const res = await fetch(`${stack.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-16le' },
        body: Buffer.from(text, 'utf16le'),
      });
      expect(res.status, `depth ${deep}`).toBe(415);
      expect(await res.json()).toMatchObject({ error: { code: 'unsupported_charset' } });
    }
    // A charset body-parser does not know, and one that is not Unicode: the same answer.
    for (const charset of ['utf-9', 'latin1']) {
      const res = await fetch(`${stack.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': `application/json; charset=${charset}` },
        body: '{"graph":{"nodes":[]}}',
      });
      expect(res.status, charset).toBe(415);
      expect(await res.json()).toMatchObject({ error: { code: 'unsupported_charset' } });
    }
    // UTF-8 said out loud is accepted.
    const utf8 = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=UTF-8' },
      body: JSON.stringify({ graph: { nodes: [call('utf8', '/work')] }, input: '\u2200' }),
    });
    expect(utf8.status).toBe(202);
  });
});

describe('schema patterns', () => {
  it('run on a linear-time engine: a catastrophic pattern against model output fails the node, not the worker', async () => {
    answer = () => ({ content: JSON.stringify({ v: `${'a'.repeat(64)}b` }) });
    const schema = {
      type: 'object',
      properties: { v: { type: 'string', pattern: '^(a+)+$' } },
      required: ['v'],
    };
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 'p', kind: 'llm', prompt: 'go', schema }] },
    });
    expect(doc.nodes.p).toMatchObject({
      status: 'failed',
      error: { code: 'validation', invalidAnswer: true, message: expect.stringContaining('pattern') },
    });
  });

  it('refuse a pattern the engine cannot run in linear time, when the graph is submitted', async () => {
    const schema = { type: 'object', properties: { v: { type: 'string', pattern: '^(?=a)a$' } } };
    const res = await postRun(stack.url, {
      graph: { nodes: [{ id: 'p', kind: 'llm', prompt: 'go', schema }] },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { code: 'invalid_graph' } });
  });
});

describe('polled sources', () => {
  const polled = (name: string) =>
    sense.next(
      (e) => e.event === 'completed' && e.jobId.includes(`poll:${name}`),
      Date.now() + 20_000,
      `a poll of ${name}`,
    );

  it('are held to the egress policy and byte cap, and follow no redirect', async () => {
    await polled('big');
    await polled('bounce');
    await polled('private');
    const { sources } = (await fetch(`${stack.url}/v1/sources`).then((r) => r.json())) as {
      sources: { name: string; status: string; lastError: string | null }[];
    };
    const of = (name: string) => sources.find((s) => s.name === name)!;
    expect(of('big').lastError).toMatch(`larger than ${MAX_BYTES} bytes`);
    expect(tools.hitsOf('src-big')[0]!.sent).toBeLessThan(HUGE);
    expect(of('bounce').lastError).toBe('HTTP 302');
    expect(tools.hitsOf('src-target')).toHaveLength(0);
    expect(of('private').lastError).toMatch('private address');
    expect(of('private').lastError).not.toMatch(/127\.0\.0\.1|::1/);
    expect(tools.hitsOf('src-private')).toHaveLength(0);
    for (const name of ['big', 'bounce', 'private']) expect(of(name).status).not.toBe('ok');
  });
});

describe('sessions', () => {
  it('cut collected messages that together pass the task limit to fit, with a marker', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    answer = async (r) => {
      if (lastUser(r) === 'start') await gate;
      return { content: 'ok' };
    };
    const say = async (text: string, extra: object = {}) => {
      const res = await post(stack.url, '/v1/sessions/many/messages', { text, ...extra });
      expect(res.status).toBe(202);
      return res.body as { runId?: string; queued: boolean };
    };
    const first = await say('start');
    for (let i = 0; i < 12; i++) {
      expect(await say(`${i}:${'m'.repeat(19_990)}`, { mode: 'collect' })).toMatchObject({ queued: true });
    }
    release();
    await waitFor(stack.url, first.runId!);
    await laneIdle(stack, 'many');
    const lines = (await fetch(`${stack.url}/v1/sessions/many/transcript`).then((r) => r.text()))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; runId?: string });
    const runs = lines.filter((l) => l.type === 'run');
    expect(runs).toHaveLength(2);
    const merged = await waitFor(stack.url, runs[1]!.runId!);
    expect(merged.status).toBe('succeeded');
    expect(merged.task!.length).toBeLessThanOrEqual(200_000);
    expect(merged.task).toMatch(/^\[12 messages arrived while you were busy\]/);
    expect(merged.task).toMatch(/…\[truncated \d+ chars\]$/);
  });
});

describe('resume', () => {
  it('keeps usage across generations; the budget is the whole run', async () => {
    const first = await runToEnd(stack.url, {
      graph: {
        nodes: [call('u-ok', '/work'), call('u-flaky', '/flaky?fail=1&status=400')],
        edges: [['u-ok', 'u-flaky']],
      },
      budget: { toolCalls: 10 },
    });
    expect(first.status).toBe('failed');
    expect(first.usage.toolCalls).toBe(2);
    expect((await post(stack.url, `/v1/runs/${first.runId}/resume`)).status).toBe(202);
    const doc: RunDocument = await waitFor(stack.url, first.runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.usage.toolCalls).toBe(3);
    expect(doc.usage.toolTimeMs).toBeGreaterThanOrEqual(first.usage.toolTimeMs);
    expect(doc.budget).toEqual(first.budget);
  });

  it('gives a run that spent its budget nothing more', async () => {
    const first = await runToEnd(stack.url, {
      graph: { nodes: [call('b-1', '/work'), call('b-2', '/work')], edges: [['b-1', 'b-2']] },
      budget: { toolCalls: 1 },
    });
    expect(first.nodes['b-2']).toMatchObject({ error: { code: 'budget_exhausted', budget: 'toolCalls' } });
    expect((await post(stack.url, `/v1/runs/${first.runId}/resume`)).status).toBe(202);
    const doc = await waitFor(stack.url, first.runId);
    expect(doc.nodes['b-2']).toMatchObject({ error: { code: 'budget_exhausted', budget: 'toolCalls' } });
    expect(tools.hitsOf('b-2')).toHaveLength(0);
  });
});
