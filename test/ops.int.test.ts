/**
 * Operating Tetraloop: Prometheus metrics after a real run, the lessons gauge read at scrape time,
 * and Bull Board behind its token.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lessonId, type Lesson, type LessonKind, type LessonStatus } from '@tetraloop/core/memory';
import { MemoryStore } from '@tetraloop/core/state';
import { metrics } from '@tetraloop/core/telemetry';
import { runToEnd, startStack, type Stack } from './support/stack.js';

let stack: Stack;
const TOKEN = 'admin-token-0123456789-0123456789-abc';

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

describe('API and run-action metrics', () => {
  it('counts requests by route name and status, refusals by error code, and cancels', async () => {
    const scrape = async (name: string) =>
      samples(await fetch(`${stack.url}/metrics`).then((r) => r.text()), name);
    const before = await scrape('tetraloop_http_errors_total');
    const bad = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope' }] } }),
    });
    expect(bad.status).toBe(400);
    // Refused by the body parser, before any handler: still labelled with its route.
    const huge = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ task: 'x'.repeat(2_000_000) }),
    });
    expect(huge.status).toBe(413);
    const posted = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        graph: { nodes: [{ id: 'w', kind: 'wait', signal: 'never', timeoutSeconds: 60 }] },
      }),
    });
    const { runId } = (await posted.json()) as { runId: string };
    expect((await fetch(`${stack.url}/v1/runs/${runId}/cancel`, { method: 'POST' })).status).toBe(202);
    await fetch(`${stack.url}/v1/runs/${runId}`);

    const errors = await scrape('tetraloop_http_errors_total');
    const grew = (key: string) => (errors.get(key) ?? 0) - (before.get(key) ?? 0);
    expect(grew('code=invalid_graph,route=runs.submit')).toBe(1);
    expect(grew('code=body_too_large,route=runs.submit')).toBe(1);
    const requests = await scrape('tetraloop_http_requests_total');
    expect(requests.get('method=POST,route=runs.cancel,status=202')).toBeGreaterThanOrEqual(1);
    expect(requests.get('method=GET,route=runs.get,status=200')).toBeGreaterThanOrEqual(1);
    // No path, no id: route names only.
    for (const key of requests.keys()) expect(key).not.toContain(runId);
    expect((await scrape('tetraloop_run_actions_total')).get('action=cancel')).toBeGreaterThanOrEqual(1);
    const text = await fetch(`${stack.url}/metrics`).then((r) => r.text());
    expect(text).toMatch(/^tetraloop_lanes_busy \d+$/m);
    expect(text).toMatch(/^tetraloop_lane_waiting_items \d+$/m);
    expect(text).toMatch(
      /tetraloop_http_request_duration_seconds_bucket\{le="[^"]+",route="runs.submit",method="POST"\}/,
    );
  });
});

/** The samples of one metric in a scrape, as `label=value,…` → value. */
function samples(text: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`).exec(line);
    if (!m) continue;
    const labels = [...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map(([, k, v]) => `${k}=${v}`).sort();
    found.set(labels.join(','), Number(m[2]));
  }
  return found;
}

describe('tetraloop_lessons', () => {
  const scrape = async (url: string): Promise<Map<string, number>> =>
    samples(await fetch(`${url}/metrics`).then((r) => r.text()), 'tetraloop_lessons');
  const now = new Date().toISOString();
  const lesson = (agentId: string, kind: LessonKind, status: LessonStatus, host: string): Lesson => ({
    id: lessonId(agentId, `rule-${kind}`, { tool: 'http', host }),
    agentId,
    kind,
    rule: `rule-${kind}`,
    scope: { tool: 'http', host },
    statement: `${host} (${kind})`,
    cases: 3,
    confidence: 0.7,
    status,
    evidence: ['r1'],
    missed: 0,
    createdAt: now,
    updatedAt: now,
    version: 1,
  });
  /** An agent's memory as the reflect loop leaves it: a recorded run, then a reflection's lessons. */
  async function remember(memory: MemoryStore, agentId: string, lessons: Lesson[]): Promise<void> {
    await memory.record({
      runId: `${agentId}-run`,
      agentId,
      fingerprint: 'graph:0',
      status: 'succeeded',
      finishedAt: now,
      durationMs: 1,
      tokens: 0,
      calls: [],
      lessons: [],
    });
    await memory.saveReflection(agentId, lessons, true, now);
  }

  it("counts every agent's lessons by kind and status at each scrape, zeros included", async () => {
    const redis = new Redis(stack.env.REDIS_URL!);
    try {
      const memory = new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 });
      const before = await scrape(stack.url);
      // Every kind × status, and nothing else: the labels are bounded.
      expect(before.size).toBe(16);
      expect([...before.values()]).toEqual(new Array<number>(16).fill(0));

      const a = [lesson('alpha', 'hard', 'active', 'a.test'), lesson('alpha', 'soft', 'probation', 'b.test')];
      await remember(memory, 'alpha', a);
      await remember(memory, 'beta', [
        lesson('beta', 'hard', 'active', 'a.test'),
        lesson('beta', 'template', 'pinned', 'c.test'),
        lesson('beta', 'prefer', 'active', 'd.test'),
      ]);
      const after = await scrape(stack.url);
      expect(after.get('kind=hard,status=active')).toBe(2);
      expect(after.get('kind=soft,status=probation')).toBe(1);
      expect(after.get('kind=template,status=pinned')).toBe(1);
      expect(after.get('kind=prefer,status=active')).toBe(1);
      expect(after.get('kind=hard,status=retired')).toBe(0);
      expect([...after.values()].reduce((x, y) => x + y, 0)).toBe(5);

      // An operator retires one: the next scrape moves it.
      const patched = await fetch(`${stack.url}/v1/lessons/${a[0]!.id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ status: 'retired' }),
      });
      expect(patched.status).toBe(200);
      const retired = await scrape(stack.url);
      expect(retired.get('kind=hard,status=active')).toBe(1);
      expect(retired.get('kind=hard,status=retired')).toBe(1);
      // No label carries an agent or lesson id.
      const text = await fetch(`${stack.url}/metrics`).then((r) => r.text());
      expect(text).not.toContain('alpha');
      expect(text).not.toContain(a[0]!.id);
    } finally {
      redis.disconnect();
    }
  });

  it('is not reported by an API without memory (TETRALOOP_REFLECT=off)', async () => {
    // One registry per process: forget what the other stack's scrapes set.
    metrics.lessons.reset();
    const off = await startStack({ pools: [], env: { TETRALOOP_REFLECT: 'off' } });
    try {
      const text = await fetch(`${off.url}/metrics`).then((r) => r.text());
      expect(text).toContain('# TYPE tetraloop_lessons gauge');
      expect(samples(text, 'tetraloop_lessons').size).toBe(0);
    } finally {
      await off.close();
    }
  });
});

describe('Bull Board', () => {
  it('is behind the root token, as bearer or a login session, never basic auth', async () => {
    expect((await fetch(`${stack.url}/admin/queues`)).status).toBe(401);
    expect(
      (await fetch(`${stack.url}/admin/queues`, { headers: { authorization: 'Bearer wrong-token-0000000' } }))
        .status,
    ).toBe(401);
    const bearer = await fetch(`${stack.url}/admin/queues`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(bearer.status).toBe(200);
    // Basic auth is what browsers cache and resend: refused, with no challenge that invites it.
    const basic = await fetch(`${stack.url}/admin/queues/api/queues`, {
      headers: { authorization: `Basic ${Buffer.from(`ops:${TOKEN}`).toString('base64')}` },
    });
    expect(basic.status).toBe(401);
    expect(basic.headers.get('www-authenticate')).toBeNull();

    // A login with the token sets an HttpOnly, SameSite=Strict session cookie.
    const wrong = await fetch(`${stack.url}/admin/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: 'not-the-token' }),
      redirect: 'manual',
    });
    expect(wrong.status).toBe(401);
    const login = await fetch(`${stack.url}/admin/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: TOKEN }),
      redirect: 'manual',
    });
    expect(login.status).toBe(303);
    const setCookie = login.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/^tl_admin=[A-Za-z0-9_-]{43};/);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    const cookie = setCookie.split(';')[0]!;
    const board = await fetch(`${stack.url}/admin/queues/api/queues`, { headers: { cookie } });
    const body = (await board.json()) as { queues: { name: string; readOnlyMode: boolean }[] };
    expect(body.queues.map((q) => q.name).sort()).toEqual(['plan', 'reflect', 'sense', 'tool']);
    // Read-only unless configured otherwise.
    expect(body.queues.every((q) => q.readOnlyMode)).toBe(true);
    // Logging out ends the session.
    await fetch(`${stack.url}/admin/logout`, { method: 'POST', headers: { cookie }, redirect: 'manual' });
    expect((await fetch(`${stack.url}/admin/queues/api/queues`, { headers: { cookie } })).status).toBe(401);
  });

  it('sets the login cookie Secure behind a TLS proxy that TETRALOOP_TRUST_PROXY trusts, and only then', async () => {
    // This test is the proxy: on loopback, saying the client's request came over HTTPS.
    const login = async (url: string, headers: Record<string, string> = {}): Promise<string> => {
      const res = await fetch(`${url}/admin/login`, {
        method: 'POST',
        headers,
        body: new URLSearchParams({ token: TOKEN }),
        redirect: 'manual',
      });
      expect(res.status).toBe(303);
      return res.headers.get('set-cookie') ?? '';
    };
    const https = { 'x-forwarded-proto': 'https' };
    const secure = /;\s*Secure(;|$)/i;
    // No proxy trusted (the default): its header is anyone's word, the cookie is not Secure.
    expect(await login(stack.url, https)).not.toMatch(secure);
    const proxied = await startStack({
      pools: [],
      env: { TETRALOOP_ADMIN_TOKEN: TOKEN, TETRALOOP_TRUST_PROXY: 'loopback' },
    });
    const elsewhere = await startStack({
      pools: [],
      env: { TETRALOOP_ADMIN_TOKEN: TOKEN, TETRALOOP_TRUST_PROXY: '10.0.0.1' },
    });
    try {
      const cookie = await login(proxied.url, https);
      expect(cookie).toMatch(/^tl_admin=[A-Za-z0-9_-]{43};/);
      expect(cookie).toMatch(secure);
      // Plain HTTP through the same proxy, and HTTPS said by an address that is not the proxy.
      expect(await login(proxied.url, { 'x-forwarded-proto': 'http' })).not.toMatch(secure);
      expect(await login(elsewhere.url, https)).not.toMatch(secure);
    } finally {
      await proxied.close();
      await elsewhere.close();
    }
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
