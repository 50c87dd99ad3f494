/** Operating Tetraloop: Prometheus metrics after a real run, and Bull Board behind its token. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runToEnd, startStack, type Stack } from './support/stack.js';

let stack: Stack;
const TOKEN = 'admin-token-0123456789';

beforeAll(async () => {
  stack = await startStack({ env: { TETRALOOP_ADMIN_TOKEN: TOKEN, TETRALOOP_QUEUE_CHECK_MS: '100' } });
});
afterAll(async () => {
  await stack?.close();
});

describe('/metrics', () => {
  it('exposes run, node and queue metrics with bounded labels after a real run', async () => {
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
    });
    const text = await fetch(`${stack.url}/metrics`).then((r) => r.text());
    expect(text).toMatch(/tetraloop_runs_finished_total\{status="succeeded"\} [1-9]/);
    expect(text).toMatch(/tetraloop_node_duration_seconds_bucket\{le="600",kind="tool",tool="json"\}/);
    expect(text).toMatch(/tetraloop_run_duration_seconds_bucket\{le="600",status="succeeded"\}/);
    expect(text).toMatch(/tetraloop_queue_jobs\{queue="tool",state="waiting"\}/);
    expect(text).toMatch(/tetraloop_queue_stalled\{queue="plan"\} 0/);
    expect(text).toContain('process_resident_memory_bytes');
    // No label carries a run id.
    expect(text).not.toContain(doc.runId);
  });
});

describe('Bull Board', () => {
  it('is behind the admin token, as bearer or basic auth', async () => {
    expect((await fetch(`${stack.url}/admin/queues`)).status).toBe(401);
    expect(
      (await fetch(`${stack.url}/admin/queues`, { headers: { authorization: 'Bearer wrong-token-0000000' } }))
        .status,
    ).toBe(401);
    const bearer = await fetch(`${stack.url}/admin/queues`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(bearer.status).toBe(200);
    const basic = await fetch(`${stack.url}/admin/queues/api/queues`, {
      headers: { authorization: `Basic ${Buffer.from(`ops:${TOKEN}`).toString('base64')}` },
    });
    const queues = ((await basic.json()) as { queues: { name: string }[] }).queues.map((q) => q.name).sort();
    expect(queues).toEqual(['plan', 'reflect', 'sense', 'tool']);
  });

  it('is off when no token is configured', async () => {
    const bare = await startStack({ pools: [] });
    try {
      expect((await fetch(`${bare.url}/admin/queues`)).status).toBe(404);
    } finally {
      await bare.close();
    }
  });
});
