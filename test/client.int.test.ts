/**
 * @tetraloop/client against a real stack (auth on): submit and `wait` (across slices, and its
 * timeout), the `events` iterator (a whole run; and resuming with `Last-Event-ID` after its
 * connection is cut by a TCP proxy mid-stream, with no event missed or repeated), the `sessions`
 * helper, typed calls through `api`, and the failures by kind: an API error with its code, an API
 * that cannot be reached, a server that is not the API.
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RunWaitTimeoutError,
  TetraloopApiError,
  TetraloopClient,
  TetraloopNotJsonError,
  TetraloopUnreachableError,
  unwrap,
  type RunEvent,
  type RunRequest,
  type StreamEvent,
} from '@tetraloop/client';
import { SCOPES } from '@tetraloop/core/domain';
import { startModelServer, type ModelServer } from './support/model-server.js';
import { laneIdle, startStack, type Stack } from './support/stack.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

const ROOT = 'client-root-token-0123456789-0123456789';
let stack: Stack;
let model: ModelServer;
let proxy: TcpProxy;
/** A key of tenant `acme` with every scope, and a client that uses it. */
let key: string;
let tl: TetraloopClient;

const gated = (signal: string): RunRequest => ({
  graph: {
    nodes: [
      { id: 'first', kind: 'tool', tool: 'json', args: { value: 1 } },
      { id: 'gate', kind: 'wait', signal, timeoutSeconds: 600 },
      { id: 'last', kind: 'tool', tool: 'json', args: { value: { $ref: 'gate.output' } } },
    ],
    edges: [
      ['first', 'gate'],
      ['gate', 'last'],
    ],
  },
});

const isRunEvent = (e: StreamEvent): e is RunEvent => 'seq' in e;

beforeAll(async () => {
  model = await startModelServer({ script: () => ({ content: 'noted' }) });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
    },
  });
  const root = new TetraloopClient({ baseUrl: stack.url, token: ROOT });
  const made = unwrap(await root.api.POST('/v1/keys', { body: { tenant: 'acme', scopes: [...SCOPES] } }));
  key = made.key;
  tl = new TetraloopClient({ baseUrl: stack.url, token: key });
  proxy = await startTcpProxy(stack.url);
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await stack?.close();
  await model?.close();
});

describe('runs', () => {
  it('submits a run and waits for it', async () => {
    const accepted = await tl.submit({
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 7 } }] },
    });
    expect(accepted.status).toBe('queued');
    const doc = await tl.wait(accepted.runId, 20_000);
    expect(doc).toMatchObject({
      runId: accepted.runId,
      status: 'succeeded',
      output: { a: 7 },
      tenant: 'acme',
    });
    expect((await tl.get(accepted.runId)).finishedAt).toBe(doc.finishedAt);
    // The same Idempotency-Key, the same run.
    const once = await tl.submit(
      { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
      { idempotencyKey: 'k-1' },
    );
    const twice = await tl.submit(
      { graph: { nodes: [{ id: 'b', kind: 'tool', tool: 'json', args: { value: 2 } }] } },
      { idempotencyKey: 'k-1' },
    );
    expect(twice.runId).toBe(once.runId);
  });

  it('waits in slices, says when the time given passed, and answers once the run settles', async () => {
    const { runId } = await tl.submit(gated('go'));
    const progress: string[] = [];
    const late = await tl
      .wait(runId, 600, { sliceMs: 200, onProgress: (doc) => progress.push(doc.status) })
      .catch((err: unknown) => err);
    expect(late).toBeInstanceOf(RunWaitTimeoutError);
    expect((late as RunWaitTimeoutError).last.finishedAt).toBeNull();
    expect(progress.length).toBeGreaterThanOrEqual(1);
    // The gate takes its signal once it waits (it does not accept one early).
    for await (const event of tl.events(runId)) {
      if (isRunEvent(event) && event.type === 'signal.awaited') break;
    }
    unwrap(
      await tl.api.POST('/v1/runs/{id}/signals/{name}', {
        params: { path: { id: runId, name: 'go' } },
        body: { ok: true },
      }),
    );
    const doc = await tl.wait(runId, 20_000, { sliceMs: 200 });
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toEqual({ last: { ok: true } });
  });

  it('follows a run’s events to its end', async () => {
    const { runId } = await tl.submit({
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
    });
    const events: StreamEvent[] = [];
    for await (const event of tl.events(runId)) events.push(event);
    const seqs = events.filter(isRunEvent).map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(events.at(-1)).toMatchObject({
      type: 'run.finished',
      family: 'lifecycle',
      data: { status: 'succeeded' },
    });
    // After the last event of a settled run there is nothing more: the iterator ends at once.
    const rest: StreamEvent[] = [];
    for await (const event of tl.events(runId, { lastEventId: seqs.at(-1)! })) rest.push(event);
    expect(rest).toEqual([]);
  });

  it('resumes with Last-Event-ID after its connection is cut mid-stream: no gap, no repeat', async () => {
    const viaProxy = new TetraloopClient({ baseUrl: proxy.url, token: key });
    const { runId } = await tl.submit(gated('resume'));
    const events: RunEvent[] = [];
    let cutAfter: number | undefined;
    for await (const event of viaProxy.events(runId, { retryMs: 50 })) {
      if (!isRunEvent(event)) continue;
      events.push(event);
      if (event.type === 'signal.awaited' && cutAfter === undefined) {
        // Drop the stream's connection, then let the run go on while no one listens.
        cutAfter = event.seq;
        proxy.cut();
        unwrap(
          await tl.api.POST('/v1/runs/{id}/signals/{name}', {
            params: { path: { id: runId, name: 'resume' } },
            body: 1,
          }),
        );
      }
    }
    expect(cutAfter).toBeDefined();
    const seqs = events.map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(events.at(-1)).toMatchObject({ type: 'run.finished', data: { status: 'succeeded' } });
    expect(seqs.at(-1)!).toBeGreaterThan(cutAfter!);
    // Two requests for the stream went through the proxy: the second one after the cut, from there.
    const streamHeads = proxy.heads.filter((h) => h.startsWith(`GET /v1/runs/${runId}/events`));
    expect(streamHeads).toHaveLength(2);
    expect(streamHeads[0]).not.toMatch(/last-event-id/i);
    // (from the last event it had yielded: the one the cut followed, or one already on its way then)
    const resumedAfter = Number(/^last-event-id: (\d+)\r$/im.exec(streamHeads[1]!)?.[1]);
    expect(resumedAfter).toBeGreaterThanOrEqual(cutAfter!);
    expect(resumedAfter).toBeLessThan(seqs.at(-1)!);
  });
});

describe('sessions', () => {
  it('sends a message, reads the lane and the transcript', async () => {
    const sent = await tl.sessions.send('alice', { text: 'hello', mode: 'followup' });
    expect(sent).toMatchObject({ sessionKey: 'alice', queued: false });
    expect(sent.runId).toBeDefined();
    expect((await tl.wait(sent.runId!, 20_000)).status).toBe('succeeded');
    await laneIdle(stack, 'alice', 20_000, { authorization: `Bearer ${key}` });
    const lane = await tl.sessions.get('alice');
    expect(lane).toMatchObject({ sessionKey: 'alice', running: null, queued: [] });
    const page = await tl.sessions.transcript('alice', { limit: 1 });
    expect(page.header).toMatchObject({ type: 'session', id: 'alice', from: 0 });
    expect(page.lines).toHaveLength(1);
    expect(page.lines[0]).toMatchObject({ type: 'message', role: 'user', text: 'hello' });
    const all = [];
    for await (const line of tl.sessions.lines('alice', 1)) all.push(line);
    expect(all.map((l) => l.type)).toEqual(expect.arrayContaining(['message', 'run']));
    expect(all.length).toBe(page.header.length);
  });
});

describe('failures, by kind', () => {
  it('an error answer is a TetraloopApiError with its status and code', async () => {
    const err = await tl.get('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TetraloopApiError);
    expect(err).toMatchObject({ status: 404, code: 'run_not_found' });
    const invalid = await tl
      .submit({ graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope' }] } })
      .catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 400, code: 'invalid_graph' });
    expect((invalid as TetraloopApiError).issues[0]).toMatchObject({ path: 'graph.nodes.0.tool' });
    const anonymous = new TetraloopClient({ baseUrl: stack.url });
    expect(
      await anonymous.get('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e),
    ).toMatchObject({
      status: 401,
      code: 'unauthorized',
    });
  });

  it('an API that cannot be reached, and a server that is not the API', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const away = await new TetraloopClient({ baseUrl: `http://127.0.0.1:${port}` })
      .submit({ task: 'x' })
      .catch((e: unknown) => e);
    expect(away).toBeInstanceOf(TetraloopUnreachableError);
    expect(away).toMatchObject({ why: 'ECONNREFUSED' });

    const page = createServer((_req, res) =>
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>'),
    );
    await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(page.address() as { port: number }).port}`;
      const other = await new TetraloopClient({ baseUrl: url }).get('x').catch((e: unknown) => e);
      expect(other).toBeInstanceOf(TetraloopNotJsonError);
      expect(other).toMatchObject({ status: 502, text: '<h1>Bad gateway</h1>' });
    } finally {
      await new Promise<void>((resolve) => page.close(() => resolve()));
    }
  });
});
