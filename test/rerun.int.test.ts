/**
 * `POST /v1/runs/:id/rerun` on the real stack: a new run that starts with its origin's snapshots of
 * every node not downstream of `from` and runs the rest — the tool server's hit counts show that the
 * upstream nodes were not executed again, and the dependents read the reused outputs. The new run
 * names its origin; the origin is left as it was. Then what a rerun refuses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeSnapshot, RunDocument, RunListing } from '@tetraloop/core/domain';
import type { RunExplain } from '@tetraloop/core/insight';
import { postRun, startStack, runToEnd, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let tools: ToolServer;

beforeAll(async () => {
  tools = await startToolServer();
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
  await tools?.close();
});

async function rerun(
  runId: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.url}/v1/runs/${runId}/rerun`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const hits = (node: string): number => tools.hitsOf(node).length;
const work = (id: string, node: string) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${tools.url}/work?node=${node}&ms=5` },
});

describe('rerun from a node', () => {
  const tag = `r${Date.now()}`;
  let origin: RunDocument;
  let again: RunDocument;
  let accepted: Record<string, unknown>;

  beforeAll(async () => {
    // a → (b, c) → d; x stands alone. d echoes what it read of c.
    origin = await runToEnd(stack.url, {
      graph: {
        nodes: [
          work('a', `${tag}-a`),
          work('b', `${tag}-b`),
          work('c', `${tag}-c`),
          {
            id: 'd',
            kind: 'tool',
            tool: 'http',
            args: {
              url: `${tools.url}/echo?node=${tag}-d&c={{c.output.body.node}}&b={{b.output.body.node}}`,
            },
          },
          work('x', `${tag}-x`),
        ],
        edges: [
          ['a', 'b'],
          ['a', 'c'],
          ['b', 'd'],
          ['c', 'd'],
        ],
      },
      tags: ['fork-test'],
    });
    expect(origin.status).toBe('succeeded');
    const res = await rerun(origin.runId, { from: 'b' });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    accepted = res.body;
    again = await waitFor(stack.url, accepted.runId as string);
  });

  it('answers a new run that names its origin', () => {
    expect(accepted).toEqual({
      runId: expect.any(String),
      status: 'queued',
      acceptedAt: expect.any(String),
      rerunOf: { runId: origin.runId, from: 'b' },
    });
    expect(again.runId).not.toBe(origin.runId);
    expect(again).toMatchObject({
      status: 'succeeded',
      tenant: origin.tenant,
      rerunOf: { runId: origin.runId, from: 'b' },
      tags: ['fork-test'],
      generation: 0,
    });
  });

  it('does not execute the nodes upstream of and beside `from` again: the tool server saw them once', () => {
    expect(hits(`${tag}-a`)).toBe(1);
    expect(hits(`${tag}-c`)).toBe(1);
    expect(hits(`${tag}-x`)).toBe(1);
    expect(hits(`${tag}-b`)).toBe(2);
    expect(hits(`${tag}-d`)).toBe(2);
  });

  it('starts with the origin’s snapshots of those nodes, marked reused, and reads their outputs', () => {
    for (const id of ['a', 'c', 'x']) {
      const { reusedFrom, ...copy } = again.nodes[id] as NodeSnapshot & { id: string };
      expect(reusedFrom, id).toBe(origin.runId);
      expect(copy, id).toEqual(origin.nodes[id]);
    }
    for (const id of ['b', 'd']) {
      expect(again.nodes[id]).toMatchObject({ status: 'succeeded' });
      expect(again.nodes[id]).not.toHaveProperty('reusedFrom');
    }
    const d = (again.nodes.d as NodeSnapshot).output as { body: { query: Record<string, string> } };
    expect(d.body.query).toMatchObject({ c: `${tag}-c`, b: `${tag}-b` });
    // Only what ran in it is charged to the new run.
    expect(again.usage.toolCalls).toBe(2);
  });

  it('leaves the origin as it was', async () => {
    const now = (await (await fetch(`${stack.url}/v1/runs/${origin.runId}`)).json()) as RunDocument;
    expect(now).toEqual(origin);
  });

  it('is listed with its origin, and explained without the reused nodes', async () => {
    const list = (await (await fetch(`${stack.url}/v1/runs?tag=fork-test`)).json()) as { runs: RunListing[] };
    expect(list.runs.map((r) => [r.runId, r.rerunOf])).toEqual([
      [again.runId, { runId: origin.runId, from: 'b' }],
      [origin.runId, null],
    ]);
    expect(list.runs[0]!.nodes).toEqual({ total: 5, succeeded: 5, failed: 0 });
    const explained = (await (
      await fetch(`${stack.url}/v1/runs/${again.runId}/explain`)
    ).json()) as RunExplain;
    expect(explained.nodes.filter((n) => n.reused).map((n) => n.id)).toEqual(['a', 'c', 'x']);
    expect(explained.criticalPath.map((n) => n.id)).toEqual(['b', 'd']);
  });

  it('makes one run per Idempotency-Key', async () => {
    const key = { 'idempotency-key': `${tag}-once` };
    const first = await rerun(origin.runId, { from: 'd' }, key);
    const second = await rerun(origin.runId, { from: 'd' }, key);
    expect(first.status).toBe(202);
    expect(second.body.runId).toBe(first.body.runId);
    await waitFor(stack.url, first.body.runId as string);
    expect(hits(`${tag}-d`)).toBe(3);
  });
});

describe('rerun of a failed run', () => {
  it('runs the failed node again and reuses what succeeded before it', async () => {
    const tag = `f${Date.now()}`;
    const origin = await runToEnd(stack.url, {
      graph: {
        nodes: [
          work('fetch', `${tag}-fetch`),
          {
            id: 'flaky',
            kind: 'tool',
            tool: 'http',
            retry: { server: 0 },
            args: { url: `${tools.url}/flaky?node=${tag}-flaky&fail=1&status=500` },
          },
        ],
        edges: [['fetch', 'flaky']],
      },
    });
    expect(origin.status).toBe('failed');
    const res = await rerun(origin.runId, { from: 'flaky' });
    expect(res.status).toBe(202);
    const again = await waitFor(stack.url, res.body.runId as string);
    expect(again.status).toBe('succeeded');
    expect(hits(`${tag}-fetch`)).toBe(1);
    expect(hits(`${tag}-flaky`)).toBe(2);
  });

  it('runs a nested graph again when it reruns from its graph node', async () => {
    const tag = `n${Date.now()}`;
    const origin = await runToEnd(stack.url, {
      graph: {
        nodes: [
          work('seed', `${tag}-seed`),
          { id: 'p', kind: 'graph', graph: { nodes: [work('inner', `${tag}-inner`)] } },
        ],
        edges: [['seed', 'p']],
      },
    });
    const res = await rerun(origin.runId, { from: 'p' });
    const again = await waitFor(stack.url, res.body.runId as string);
    expect(again.status).toBe('succeeded');
    expect(hits(`${tag}-seed`)).toBe(1);
    expect(hits(`${tag}-inner`)).toBe(2);
  });
});

describe('what a rerun refuses', () => {
  it('a node the run does not have, with the field at fault', async () => {
    const origin = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
    });
    const res = await rerun(origin.runId, { from: 'nope' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { code: 'invalid_request', issues: [{ path: 'from' }] } });
    expect((await rerun(origin.runId, {})).status).toBe(400);
    expect((await rerun(origin.runId, { from: 'a', extra: 1 })).status).toBe(400);
    const text = await fetch(`${stack.url}/v1/runs/${origin.runId}/rerun`, {
      method: 'POST',
      body: 'from=a',
    });
    expect(text.status).toBe(415);
  });

  it('a run that has not settled, and an unknown run', async () => {
    const posted = await postRun(stack.url, {
      graph: { nodes: [{ id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 60 }] },
    });
    const runId = posted.body.runId as string;
    const res = await rerun(runId, { from: 'gate' });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: { code: 'not_rerunnable' } });
    await fetch(`${stack.url}/v1/runs/${runId}/cancel`, { method: 'POST' });
    expect((await rerun('4c5403be-886b-4587-863f-2605f1e6eae1', { from: 'a' })).status).toBe(404);
  });
});
