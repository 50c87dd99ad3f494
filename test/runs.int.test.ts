/** Runs end to end on a real Redis: API + plan and tool pools in this process, tools calling a loopback server. */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overlaps, startToolServer, type ToolServer } from './support/tool-server.js';
import { postRun, runToEnd, startStack, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let server: ToolServer;

beforeAll(async () => {
  server = await startToolServer();
  stack = await startStack({ env: { TETRALOOP_TOOL_CONCURRENCY: '8' } });
});
afterAll(async () => {
  await stack?.close();
  await server?.close();
});

const http = (id: string, ms: number, extra: object = {}) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/work?node=${id}&ms=${ms}` },
  ...extra,
});

describe('execution', () => {
  it('runs a diamond with every node exactly once and the middle branches concurrently', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [http('a', 10), http('b', 300), http('c', 300), http('d', 10)],
        edges: [
          ['a', 'b'],
          ['a', 'c'],
          ['b', 'd'],
          ['c', 'd'],
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    for (const id of ['a', 'b', 'c', 'd']) expect(server.hitsOf(id)).toHaveLength(1);
    expect(overlaps(server.hitsOf('b')[0]!, server.hitsOf('c')[0]!)).toBe(true);
    // d started only after both of its dependencies answered.
    const dStart = server.hitsOf('d')[0]!.start;
    expect(dStart).toBeGreaterThanOrEqual(server.hitsOf('b')[0]!.end!);
    expect(dStart).toBeGreaterThanOrEqual(server.hitsOf('c')[0]!.end!);
    expect(doc.output).toEqual({ d: expect.objectContaining({ status: 200, body: { node: 'd', ms: 10 } }) });
    expect(doc.nodes.b).toMatchObject({ status: 'succeeded', attempts: [{ attempt: 1 }] });
  });

  it('starts a node as soon as its own dependencies are done (no level barrier)', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          http('u-root', 10),
          http('u-slow', 1500),
          http('u-f1', 50),
          http('u-f2', 50),
          http('u-f3', 50),
        ],
        edges: [
          ['u-root', 'u-slow'],
          ['u-root', 'u-f1'],
          ['u-f1', 'u-f2'],
          ['u-f2', 'u-f3'],
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    const slow = server.hitsOf('u-slow')[0]!;
    // u-f2 and u-f3 sit at depth 2 and 3; with a barrier they would wait for u-slow (depth 1).
    expect(server.hitsOf('u-f2')[0]!.start).toBeLessThan(slow.end!);
    expect(server.hitsOf('u-f3')[0]!.start).toBeLessThan(slow.end!);
  });

  it('passes data along references and returns the sinks as output', async () => {
    const doc = await runToEnd(stack.url, {
      input: { greeting: 'hello' },
      graph: {
        nodes: [
          http('r-a', 1),
          {
            id: 'r-b',
            kind: 'tool',
            tool: 'json',
            args: {
              value: {
                node: { $ref: 'r-a.output.body.node' },
                msg: '{{input.greeting}} from {{r-a.output.body.node}}',
              },
            },
          },
          { id: 'r-c', kind: 'tool', tool: 'json', args: { value: { $ref: 'r-b.output' }, pick: 'msg' } },
        ],
        edges: [
          ['r-a', 'r-b'],
          ['r-b', 'r-c'],
        ],
      },
    });
    expect(doc.output).toEqual({ 'r-c': 'hello from r-a' });
  });

  it('fails the run when a node fails, and never starts the nodes after it', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          { id: 'f-bad', kind: 'tool', tool: 'http', args: { url: `${server.url}/status/400?node=f-bad` } },
          http('f-after', 1),
        ],
        edges: [['f-bad', 'f-after']],
      },
    });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({
      code: 'node_failed',
      nodeId: 'f-bad',
      cause: { code: 'validation', status: 400 },
    });
    expect(doc.nodes['f-bad']).toMatchObject({
      status: 'failed',
      attempts: [{ attempt: 1, error: { code: 'validation' } }],
    });
    expect(doc.nodes['f-after']).toMatchObject({ status: 'skipped', attempts: [] });
    expect(server.hitsOf('f-bad')).toHaveLength(1);
    expect(server.hitsOf('f-after')).toHaveLength(0);
  });

  it('refuses loopback addresses that are not allowlisted', async () => {
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 'e', kind: 'tool', tool: 'http', args: { url: 'http://localhost:9/x' } }] },
    });
    expect(doc.nodes.e).toMatchObject({ status: 'failed', error: { code: 'validation' } });
    expect((doc.nodes.e as { error: { message: string } }).error.message).toMatch(/refused/);
  });

  it('sends an Idempotency-Key that names neither the run nor the node', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [http('k-a', 1)] } });
    const key = server.hitsOf('k-a')[0]?.idempotencyKey;
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(key).not.toContain(doc.runId);
  });
});

describe('API', () => {
  it('returns the same run for the same Idempotency-Key', async () => {
    const body = { graph: { nodes: [http('i-a', 1)] } };
    const first = await postRun(stack.url, body, { 'idempotency-key': 'order-42' });
    const second = await postRun(stack.url, body, { 'idempotency-key': 'order-42' });
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    expect(second.body.runId).toBe(first.body.runId);
    await waitFor(stack.url, first.body.runId as string);
    expect(server.hitsOf('i-a')).toHaveLength(1);
  });

  it('answers wait with 202 before the run settles and 200 after', async () => {
    const posted = await postRun(stack.url, { graph: { nodes: [http('w-a', 800)] } });
    const runId = posted.body.runId as string;
    const early = await fetch(`${stack.url}/v1/runs/${runId}/wait?timeoutMs=50`);
    expect(early.status).toBe(202);
    expect(((await early.json()) as { finishedAt: unknown }).finishedAt).toBeNull();
    const late = await fetch(`${stack.url}/v1/runs/${runId}/wait?timeoutMs=20000`);
    expect(late.status).toBe(200);
    expect(((await late.json()) as { status: string }).status).toBe('succeeded');
  });

  it('answers wait for an unknown run with 404', async () => {
    const res = await fetch(`${stack.url}/v1/runs/${randomUUID()}/wait?timeoutMs=50`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('run_not_found');
  });

  it('cancels a run: running nodes are aborted and nothing else starts', async () => {
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          {
            id: 'c-hang',
            kind: 'tool',
            tool: 'http',
            args: { url: `${server.url}/hang?node=c-hang` },
            timeoutMs: 60_000,
          },
          http('c-next', 1),
        ],
        edges: [['c-hang', 'c-next']],
      },
    });
    const runId = posted.body.runId as string;
    await server.hitCount('c-hang', 1);
    const cancel = await fetch(`${stack.url}/v1/runs/${runId}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(202);
    expect(await cancel.json()).toEqual({ runId, status: 'cancelled' });
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('cancelled');
    expect(doc.nodes['c-hang']).toMatchObject({ status: 'cancelled', error: { code: 'aborted' } });
    expect(doc.nodes['c-next']).toMatchObject({ status: 'cancelled', attempts: [] });
    expect(server.hitsOf('c-next')).toHaveLength(0);
    // The aborted request was closed by the worker, not left hanging.
    expect(server.hitsOf('c-hang')[0]?.end).toBeDefined();
    const again = await fetch(`${stack.url}/v1/runs/${runId}/cancel`, { method: 'POST' });
    expect(again.status).toBe(202);
  });

  it('refuses to cancel a finished run with 409', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [http('x-a', 1)] } });
    const res = await fetch(`${stack.url}/v1/runs/${doc.runId}/cancel`, { method: 'POST' });
    expect(res.status).toBe(409);
  });

  it('rejects an invalid graph whole, with every problem and its path, and runs nothing', async () => {
    const before = server.hits.length;
    const res = await postRun(stack.url, {
      graph: {
        nodes: [
          http('v-a', 1),
          http('v-a', 1),
          { id: 'v-c', kind: 'tool', tool: 'nope', args: {} },
          { id: 'v-d', kind: 'wait' },
        ],
        edges: [
          ['v-a', 'v-zz'],
          ['v-c', 'v-c'],
        ],
      },
    });
    expect(res.status).toBe(400);
    const error = res.body.error as { code: string; issues: { path: string; message: string }[] };
    expect(error.code).toBe('invalid_graph');
    expect(error.issues.map((i) => i.path).sort()).toEqual(
      [
        'graph.edges.0.1',
        'graph.edges.1',
        'graph.nodes.1.id',
        'graph.nodes.2.tool',
        'graph.nodes.3.signal',
      ].sort(),
    );
    expect(server.hits.length).toBe(before);
  });

  it('maps client mistakes to 4xx with the field, never 500', async () => {
    const badJson = await postRun(stack.url, '{"graph": ');
    expect(badJson.status).toBe(400);
    expect(badJson.body).toMatchObject({ error: { code: 'invalid_json' } });

    const wrongType = await postRun(stack.url, {
      graph: { nodes: [http('t-a', 1)] },
      timeoutSeconds: 'soon',
    });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body).toMatchObject({
      error: { code: 'invalid_request', issues: [{ path: 'timeoutSeconds' }] },
    });

    const unknownField = await postRun(stack.url, { graph: { nodes: [http('t-b', 1)] }, colour: 'red' });
    expect(unknownField.status).toBe(400);

    const missing = await postRun(stack.url, {});
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ error: { issues: [{ path: 'graph' }] } });

    const tooBig = await postRun(
      stack.url,
      JSON.stringify({ graph: { nodes: [] }, metadata: { pad: 'x'.repeat(1024 * 1024 + 10) } }),
    );
    expect(tooBig.status).toBe(413);

    const notJson = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'hi',
    });
    expect(notJson.status).toBe(415);

    const unknownRun = await fetch(`${stack.url}/v1/runs/00000000-0000-4000-8000-000000000000`);
    expect(unknownRun.status).toBe(404);
    const badId = await fetch(`${stack.url}/v1/runs/not-a-run/wait`);
    expect(badId.status).toBe(404);
    const badWait = await fetch(
      `${stack.url}/v1/runs/00000000-0000-4000-8000-000000000000/wait?timeoutMs=-1`,
    );
    expect(badWait.status).toBe(400);
  });

  it('reports health and readiness', async () => {
    expect((await fetch(`${stack.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${stack.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', redis: 'up' });
  });
});
