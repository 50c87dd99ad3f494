/**
 * The tool loop's harness on a real Redis: failure classes and their retries, backoff with jitter,
 * timeouts, onError continue, loop suspicion, deadline, budgets, resume, events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptRecord, RunDocument } from '@tetraloop/core/domain';
import { metrics } from '@tetraloop/core/telemetry';
import { post, postRun, readEvents, runToEnd, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let server: ToolServer;
const refreshed: { nodeId: string; code: string }[] = [];

beforeAll(async () => {
  server = await startToolServer();
  stack = await startStack({
    hooks: {
      async refreshCredentials({ nodeId, error }) {
        refreshed.push({ nodeId, code: error.code });
        await fetch(`${server.url}/refresh`, { method: 'POST' });
      },
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await server?.close();
});

const call = (id: string, path: string, extra: object = {}) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}${path}${path.includes('?') ? '&' : '?'}node=${id}` },
  ...extra,
});
const gap = (id: string, i: number): number => server.hitsOf(id)[i + 1]!.start - server.hitsOf(id)[i]!.end!;

describe('failure classes and retries', () => {
  it('retries a 503 with exponential backoff and ±20 % jitter, then succeeds on attempt 3', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [call('s503', '/flaky?fail=2&status=503')] } });
    expect(doc.status).toBe('succeeded');
    const attempts = doc.nodes.s503!.attempts;
    expect(attempts.map((a) => a.error?.code ?? 'ok')).toEqual(['server', 'server', 'ok']);
    const [first, second] = attempts as [AttemptRecord, AttemptRecord];
    expect(first.retryDelayMs).toBeGreaterThanOrEqual(800);
    expect(first.retryDelayMs).toBeLessThanOrEqual(1200);
    expect(second.retryDelayMs).toBeGreaterThanOrEqual(1600);
    expect(second.retryDelayMs).toBeLessThanOrEqual(2400);
    expect(server.hitsOf('s503')).toHaveLength(3);
    // The recorded delays were honoured: the calls are at least that far apart.
    expect(gap('s503', 0)).toBeGreaterThanOrEqual(first.retryDelayMs! - 5);
    expect(gap('s503', 1)).toBeGreaterThanOrEqual(second.retryDelayMs! - 5);
    // Every attempt carried the same Idempotency-Key, which does not give the run away.
    const keys = new Set(server.hitsOf('s503').map((h) => h.idempotencyKey));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f]{64}$/);
    expect([...keys][0]).not.toContain(doc.runId);
  });

  it('never retries a 400', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [call('s400', '/status/400')] } });
    expect(doc.status).toBe('failed');
    expect(doc.nodes.s400).toMatchObject({ status: 'failed', error: { code: 'validation', status: 400 } });
    expect(server.hitsOf('s400')).toHaveLength(1);
  });

  it('waits at least Retry-After before retrying a 429', async () => {
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [call('s429', '/flaky?fail=1&status=429&retryAfter=2')] },
    });
    expect(doc.status).toBe('succeeded');
    const first = doc.nodes.s429!.attempts[0]!;
    expect(first.error).toMatchObject({ code: 'rate_limited', retryAfterMs: 2000 });
    expect(first.retryDelayMs).toBeGreaterThanOrEqual(2000);
    expect(gap('s429', 0)).toBeGreaterThanOrEqual(1995);
  });

  it('ends a call to a hanging server as `timeout` at timeoutMs, abandoning it', async () => {
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [call('hang', '/hang', { timeoutMs: 300, retry: { timeout: 0 } })] },
    });
    expect(doc.nodes.hang).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
    const attempt = doc.nodes.hang!.attempts[0]!;
    expect(attempt.durationMs).toBeGreaterThanOrEqual(295);
    expect(attempt.durationMs).toBeLessThan(3000);
    // The request was torn down, not left open.
    expect(server.hitsOf('hang')[0]?.end).toBeDefined();
  });

  it('refreshes credentials once on 401 and retries', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [call('auth', '/auth')] } });
    expect(doc.status).toBe('succeeded');
    expect(refreshed).toEqual([{ nodeId: 'auth', code: 'auth' }]);
    expect(doc.nodes.auth!.attempts.map((a) => a.error?.code ?? 'ok')).toEqual(['auth', 'ok']);
  });

  it('with onError "continue", hands {error} downstream and the run goes on', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          call('soft', '/status/404', { onError: 'continue' }),
          { id: 'after-soft', kind: 'tool', tool: 'json', args: { value: { got: { $ref: 'soft.output' } } } },
        ],
        edges: [['soft', 'after-soft']],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.soft).toMatchObject({ status: 'failed', error: { code: 'validation', status: 404 } });
    expect(doc.output).toEqual({
      'after-soft': { got: { error: { code: 'validation', message: 'HTTP 404' } } },
    });
  });
});

describe('retries with different parameters', () => {
  it('runs each retry with the next override of retry.vary and records which', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          call('varied', '/status/503', {
            retry: {
              server: 3,
              // The first retry tries another path that fails too; the second a mirror that answers.
              vary: [
                { args: { url: `${server.url}/status/502?node=varied-2` } },
                { args: { url: `${server.url}/work?node=varied-3` }, timeoutMs: 5000 },
              ],
            },
          }),
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.varied!.attempts.map((a) => [a.variant, a.error?.code ?? 'ok'])).toEqual([
      [undefined, 'server'],
      [1, 'server'],
      [2, 'ok'],
    ]);
    expect(server.hitsOf('varied')).toHaveLength(1);
    expect(server.hitsOf('varied-2')).toHaveLength(1);
    expect(server.hitsOf('varied-3')).toHaveLength(1);
  });

  it('refuses, before anything runs, an override that breaks the node or changes what it is', async () => {
    const res = await postRun(stack.url, {
      graph: {
        nodes: [
          call('bad-vary', '/work', {
            retry: { vary: [{ args: { url: 'not a url' } }, { kind: 'llm' }, { timeoutMs: -1 }] },
          }),
        ],
      },
    });
    expect(res.status).toBe(400);
    const issues = (res.body as { error: { issues: { path: string }[] } }).error.issues;
    expect(issues.map((i) => i.path).sort()).toEqual([
      'graph.nodes.0.retry.vary.0.args.url',
      'graph.nodes.0.retry.vary.1.kind',
      'graph.nodes.0.retry.vary.2.timeoutMs',
    ]);
    expect(server.hitsOf('bad-vary')).toHaveLength(0);
  });
});

describe('run limits', () => {
  it('ends a run past its deadline as timed_out: running nodes aborted, nothing new starts', async () => {
    const doc = await runToEnd(stack.url, {
      timeoutSeconds: 1,
      graph: {
        nodes: [call('dl-hang', '/hang', { timeoutMs: 60_000 }), call('dl-next', '/work?ms=1')],
        edges: [['dl-hang', 'dl-next']],
      },
    });
    expect(doc.status).toBe('timed_out');
    expect(doc.error).toMatchObject({ code: 'timed_out' });
    expect(doc.nodes['dl-hang']).toMatchObject({ status: 'cancelled', error: { code: 'aborted' } });
    expect(doc.nodes['dl-next']).toMatchObject({ status: 'skipped' });
    expect(server.hitsOf('dl-next')).toHaveLength(0);
    const aborted = server.hitsOf('dl-hang')[0]!;
    expect(aborted.end! - aborted.start).toBeLessThan(5000);
  });

  it('ends a node as budget_exhausted when the run has used its tool calls', async () => {
    const doc = await runToEnd(stack.url, {
      budget: { toolCalls: 2 },
      graph: {
        nodes: [call('b1', '/work?ms=1'), call('b2', '/work?ms=1'), call('b3', '/work?ms=1')],
        edges: [
          ['b1', 'b2'],
          ['b2', 'b3'],
        ],
      },
    });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'budget_exhausted', nodeId: 'b3' });
    expect(doc.nodes.b3).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exhausted', budget: 'toolCalls' },
    });
    expect(server.hitsOf('b3')).toHaveLength(0);
    expect(doc.usage.toolCalls).toBeGreaterThanOrEqual(2);
  });

  it('cuts a call off when the run has used its tool time', async () => {
    const doc = await runToEnd(stack.url, {
      budget: { toolTimeMs: 300 },
      graph: { nodes: [call('bt', '/work?ms=3000')] },
    });
    expect(doc.nodes.bt).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exhausted', budget: 'toolTimeMs' },
    });
    expect(doc.nodes.bt!.attempts[0]!.durationMs).toBeLessThan(2000);
  });
});

describe('resume', () => {
  it('re-runs a failed run from its snapshots: completed nodes are kept', async () => {
    const first = await runToEnd(stack.url, {
      graph: {
        nodes: [
          call('r-ok', '/work?ms=1'),
          call('r-flaky', '/flaky?fail=1&status=400'),
          call('r-end', '/work?ms=1'),
        ],
        edges: [
          ['r-ok', 'r-flaky'],
          ['r-flaky', 'r-end'],
        ],
      },
    });
    expect(first.status).toBe('failed');
    const resumed = await post(stack.url, `/v1/runs/${first.runId}/resume`);
    expect(resumed).toEqual({ status: 202, body: { runId: first.runId, status: 'queued', generation: 1 } });
    const doc = await waitFor(stack.url, first.runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.generation).toBe(1);
    expect(server.hitsOf('r-ok')).toHaveLength(1);
    expect(server.hitsOf('r-flaky')).toHaveLength(2);
    expect(server.hitsOf('r-end')).toHaveLength(1);
    // The kept snapshot is the very one the first generation wrote.
    expect(doc.nodes['r-ok']).toEqual(first.nodes['r-ok']);
  });

  it('refuses to resume a run that did not fail', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [call('r-fine', '/work?ms=1')] } });
    const res = await post(stack.url, `/v1/runs/${doc.runId}/resume`);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: { code: 'not_resumable' } });
  });
});

describe('events', () => {
  it('streams every state change as SSE and replays from Last-Event-ID', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [call('ev-a', '/flaky?fail=1&status=503'), call('ev-b', '/work?ms=1')],
        edges: [['ev-a', 'ev-b']],
      },
    });
    const all = await readEvents(stack.url, doc.runId);
    const types = all.map((e) => `${e.event}/${e.data.type}${e.data.nodeId ? `:${e.data.nodeId}` : ''}`);
    expect(types).toEqual([
      'lifecycle/run.queued',
      'lifecycle/run.started',
      'node/node.queued:ev-a',
      'node/node.started:ev-a',
      'tool/tool.start:ev-a',
      'node/node.retrying:ev-a',
      'node/node.started:ev-a',
      'tool/tool.start:ev-a',
      'node/node.succeeded:ev-a',
      'tool/tool.result:ev-a',
      'node/node.queued:ev-b',
      'node/node.started:ev-b',
      'tool/tool.start:ev-b',
      'node/node.succeeded:ev-b',
      'tool/tool.result:ev-b',
      'lifecycle/run.decided',
      'lifecycle/run.finished',
    ]);
    expect(all.map((e) => e.id)).toEqual(all.map((_, i) => i + 1));
    expect(all.at(-1)!.data).toMatchObject({ family: 'lifecycle', phase: 'end' });
    const retrying = all.find((e) => e.data.type === 'node.retrying')!;
    expect(retrying.data).toMatchObject({ runId: doc.runId, seq: 6, data: { error: { code: 'server' } } });
    expect(retrying.data.data).toHaveProperty('retryDelayMs');

    const replay = await readEvents(stack.url, doc.runId, 12);
    expect(replay.map((e) => e.id)).toEqual([13, 14, 15, 16, 17]);
  });

  it('follows a resumed run to its current generation, and closes at once past the end', async () => {
    const first = await runToEnd(stack.url, { graph: { nodes: [call('ev-r', '/flaky?fail=1&status=400')] } });
    expect(first.status).toBe('failed');
    await post(stack.url, `/v1/runs/${first.runId}/resume`);
    await waitFor(stack.url, first.runId);
    const all = await readEvents(stack.url, first.runId);
    const finished = all.filter((e) => e.data.type === 'run.finished').map((e) => e.data.data);
    expect(finished).toEqual([
      expect.objectContaining({ status: 'failed', generation: 0 }),
      expect.objectContaining({ status: 'succeeded', generation: 1 }),
    ]);
    expect(await readEvents(stack.url, first.runId, all.at(-1)!.id)).toEqual([]);
  });

  it('follows a live run and closes after its final event', async () => {
    const posted = await postRun(stack.url, { graph: { nodes: [call('live', '/work?ms=400')] } });
    const events = await readEvents(stack.url, posted.body.runId as string);
    expect(events.at(-1)).toMatchObject({
      event: 'lifecycle',
      data: { type: 'run.finished', phase: 'end', data: { status: 'succeeded' } },
    });
  });
});

describe('node inputs', () => {
  it('records what each call was made with beside its output: references filled in', async () => {
    const doc = await runToEnd(stack.url, {
      input: { city: 'Lyon' },
      graph: {
        nodes: [
          { id: 'in-a', kind: 'tool', tool: 'json', args: { value: { city: { $ref: 'input.city' } } } },
          {
            id: 'in-b',
            kind: 'tool',
            tool: 'json',
            args: { value: 'weather in {{in-a.output.city}}' },
          },
        ],
        edges: [['in-a', 'in-b']],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes['in-a']).toMatchObject({ input: { value: { city: 'Lyon' } }, output: { city: 'Lyon' } });
    expect(doc.nodes['in-b']).toMatchObject({
      input: { value: 'weather in Lyon' },
      output: 'weather in Lyon',
    });
  });
});

describe('waiting with abortOnDisconnect', () => {
  const waitsOpen = async (): Promise<number> =>
    (await metrics.longRequestsOpen.get()).values.find((v) => v.labels.kind === 'wait')?.value ?? 0;

  it('cancels the run when the waiting client goes away before it settles', async () => {
    const posted = await postRun(stack.url, {
      graph: { nodes: [call('abandoned', '/hang', { timeoutMs: 60_000 })] },
    });
    const runId = posted.body.runId as string;
    const client = new AbortController();
    const waiting = fetch(`${stack.url}/v1/runs/${runId}/wait?timeoutMs=60000&abortOnDisconnect=true`, {
      signal: client.signal,
    }).catch(() => undefined);
    // The server holds the wait open; then the client goes away.
    await expect.poll(waitsOpen, { timeout: 5000, interval: 20 }).toBe(1);
    client.abort();
    await waiting;
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('cancelled');
  });

  it('leaves the run alone without it, and answers a bad value with 400', async () => {
    // The node is held until the client has gone: the wait is open while the run runs.
    const posted = await postRun(stack.url, { graph: { nodes: [call('kept', '/gate')] } });
    const runId = posted.body.runId as string;
    const client = new AbortController();
    const waiting = fetch(`${stack.url}/v1/runs/${runId}/wait?timeoutMs=60000`, {
      signal: client.signal,
    }).catch(() => undefined);
    await expect.poll(waitsOpen, { timeout: 5000, interval: 20 }).toBe(1);
    client.abort();
    await waiting;
    // The server saw the client go (and would have cancelled with abortOnDisconnect); then the node ends.
    await expect.poll(waitsOpen, { timeout: 5000, interval: 20 }).toBe(0);
    server.openGate('kept');
    const res = await fetch(`${stack.url}/v1/runs/${runId}/wait?timeoutMs=10000`);
    expect(((await res.json()) as RunDocument).status).toBe('succeeded');
    const bad = await fetch(`${stack.url}/v1/runs/${runId}/wait?abortOnDisconnect=yes`);
    expect(bad.status).toBe(400);
  });
});
