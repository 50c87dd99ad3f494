/**
 * `GET /v1/runs` on the real stack: filters by status, tag, agent, session and creation time, each
 * tenant seeing only its own runs, summaries that agree with the run documents, cursors that page
 * stably while runs are added (also through runs made in the same millisecond), and entries of runs
 * that expired dropped from the index as they are met.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument, RunListing } from '@tetraloop/core/domain';
import { RunStore, runKeyList, runKeys, runSearchKeys } from '@tetraloop/core/state';
import { callAsTenant, startStack, type Stack } from './support/stack.js';

const ROOT = 'root-token-0123456789-0123456789-0123456789';
let stack: Stack;
let redis: Redis;
let store: RunStore;

beforeAll(async () => {
  stack = await startStack({ env: { TETRALOOP_AUTH: 'required', TETRALOOP_ADMIN_TOKEN: ROOT } });
  redis = new Redis(stack.env.REDIS_URL!);
  store = new RunStore(redis, { prefix: stack.prefix, retentionSeconds: 3600 });
});

afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

/** A request as the root token acting for `tenant`. */
const call = (tenant: string, method: string, path: string, body?: unknown) =>
  callAsTenant(stack.url, ROOT, tenant, method, path, body);

const ok = { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } };
const broken = {
  graph: {
    nodes: [
      { id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } },
      {
        id: 'down',
        kind: 'tool',
        tool: 'http',
        retry: { network: 0 },
        args: { url: 'http://127.0.0.1:9/x' },
      },
    ],
  },
};

async function submit(tenant: string, body: Record<string, unknown>): Promise<string> {
  const res = await call(tenant, 'POST', '/v1/runs', body);
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.runId as string;
}

async function settled(tenant: string, runId: string): Promise<RunDocument> {
  const res = await call(tenant, 'GET', `/v1/runs/${runId}/wait?timeoutMs=20000`);
  expect(res.status).toBe(200);
  return res.body as unknown as RunDocument;
}

interface Page {
  runs: RunListing[];
  nextCursor: string | null;
}

async function list(tenant: string, query: string): Promise<Page> {
  const res = await call(tenant, 'GET', `/v1/runs${query ? `?${query}` : ''}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as unknown as Page;
}

const ids = (page: Page): string[] => page.runs.map((r) => r.runId);

describe('GET /v1/runs', () => {
  const tenant = `search-${randomUUID().slice(0, 8)}`;
  const made: { runId: string; doc: RunDocument }[] = [];

  beforeAll(async () => {
    for (const body of [
      { ...ok, tags: ['nightly'] },
      { ...ok, tags: ['nightly', 'nightly'], agentId: 'scout' },
      { ...broken, tags: ['nightly', 'flaky'] },
      { ...ok, agentId: 'scout' },
    ]) {
      const runId = await submit(tenant, body);
      made.push({ runId, doc: await settled(tenant, runId) });
    }
  });

  it('lists the tenant’s runs newest first, each summarised as its document says', async () => {
    const page = await list(tenant, '');
    expect(ids(page)).toEqual(made.map((m) => m.runId).reverse());
    expect(page.nextCursor).toBeNull();
    const failed = made[2]!.doc;
    expect(failed.status).toBe('failed');
    expect(page.runs.find((r) => r.runId === failed.runId)).toEqual({
      runId: failed.runId,
      status: 'failed',
      agentId: 'main',
      sessionKey: null,
      task: null,
      createdAt: failed.createdAt,
      startedAt: failed.startedAt,
      finishedAt: failed.finishedAt,
      durationMs: Date.parse(failed.finishedAt!) - Date.parse(failed.startedAt!),
      nodes: {
        total: 2,
        succeeded: Object.values(failed.nodes).filter((n) => n.status === 'succeeded').length,
        failed: 1,
      },
      usage: failed.usage,
      tags: ['nightly', 'flaky'],
      rerunOf: null,
      scheduleId: null,
      triggerId: null,
    });
    // A repeated tag counts once.
    expect(page.runs.find((r) => r.runId === made[1]!.runId)?.tags).toEqual(['nightly']);
  });

  it('filters by status, tag, agent and their combinations', async () => {
    const [first, second, third, fourth] = made.map((m) => m.runId);
    expect(ids(await list(tenant, 'status=failed'))).toEqual([third]);
    expect(ids(await list(tenant, 'status=succeeded'))).toEqual([fourth, second, first]);
    expect(ids(await list(tenant, 'tag=nightly'))).toEqual([third, second, first]);
    expect(ids(await list(tenant, 'tag=flaky'))).toEqual([third]);
    expect(ids(await list(tenant, 'agentId=scout'))).toEqual([fourth, second]);
    expect(ids(await list(tenant, 'agentId=scout&tag=nightly&status=succeeded'))).toEqual([second]);
    expect(ids(await list(tenant, 'status=cancelled'))).toEqual([]);
  });

  it('filters by creation time, as ISO times or durations before now', async () => {
    const all = made.map((m) => m.runId).reverse();
    expect(ids(await list(tenant, 'since=1h'))).toEqual(all);
    const third = made[2]!.doc.createdAt;
    expect(ids(await list(tenant, `since=${encodeURIComponent(third)}`))).toEqual(all.slice(0, 2));
    expect(ids(await list(tenant, `until=${encodeURIComponent(third)}`))).toEqual(all.slice(1));
    expect(ids(await list(tenant, 'until=2000-01-01T00:00:00Z'))).toEqual([]);
  });

  it('shows another tenant none of them', async () => {
    const other = `other-${randomUUID().slice(0, 8)}`;
    const mine = await submit(other, { ...ok, tags: ['nightly'] });
    expect(ids(await list(other, ''))).toEqual([mine]);
    expect(ids(await list(other, 'tag=nightly'))).toEqual([mine]);
    expect(ids(await list(other, 'status=failed'))).toEqual([]);
    expect(ids(await list(tenant, ''))).not.toContain(mine);
  });

  it('refuses a bad filter, time or cursor with the query parameter at fault', async () => {
    const refused = async (query: string, path: string): Promise<void> => {
      const res = await call(tenant, 'GET', `/v1/runs?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body).toMatchObject({ error: { code: 'invalid_request', issues: [{ path }] } });
    };
    await refused('status=lost', 'query.status');
    await refused('since=yesterday', 'query.since');
    await refused('until=2026-11-30', 'query.until');
    await refused('cursor=nope', 'query.cursor');
    await refused('limit=0', 'query.limit');
    await refused('limit=201', 'query.limit');
    await refused('tag=a%20b', 'query.tag');
    await refused('sort=asc', 'query');
  });
});

describe('paging', () => {
  it('pages with a cursor that neither skips nor repeats a run while new runs arrive', async () => {
    const tenant = `pages-${randomUUID().slice(0, 8)}`;
    const first: string[] = [];
    for (let i = 0; i < 5; i++) first.push(await submit(tenant, ok));
    // Newest first; two runs made in one millisecond are in id order (descending).
    const before = ids(await list(tenant, 'limit=10'));
    expect(new Set(before)).toEqual(new Set(first));
    const seen: string[] = [];
    let page = await list(tenant, 'limit=2');
    seen.push(...ids(page));
    // Runs made while the client pages are newer: they are on no later page.
    const later = [await submit(tenant, ok), await submit(tenant, ok)];
    while (page.nextCursor) {
      page = await list(tenant, `limit=2&cursor=${page.nextCursor}`);
      seen.push(...ids(page));
    }
    expect(seen).toEqual(before);
    const after = ids(await list(tenant, 'limit=10'));
    expect(after.slice(2)).toEqual(before);
    expect(new Set(after.slice(0, 2))).toEqual(new Set(later));
  });

  it('pages through runs made in the same millisecond one at a time, in a stable order', async () => {
    const tenant = `ties-${randomUUID().slice(0, 8)}`;
    const createdAt = new Date().toISOString();
    const runIds = Array.from({ length: 7 }, () => randomUUID());
    for (const runId of runIds) {
      await store.create({
        runId,
        graph: ok.graph as never,
        plan: ok.graph as never,
        tenant,
        sessionKey: `${tenant}~alice`,
        input: null,
        timeoutSeconds: 60,
        budget: {},
        metadata: undefined,
        createdAt,
        pending: new Map(),
      });
    }
    for (const limit of [1, 2, 3]) {
      const seen: string[] = [];
      let page = await list(tenant, `limit=${limit}&sessionKey=alice`);
      seen.push(...ids(page));
      while (page.nextCursor) {
        page = await list(tenant, `limit=${limit}&sessionKey=alice&cursor=${page.nextCursor}`);
        seen.push(...ids(page));
      }
      expect(seen, `limit ${limit}`).toEqual([...runIds].sort().reverse());
    }
    // The session is shown as the client named it.
    expect((await list(tenant, 'limit=1')).runs[0]?.sessionKey).toBe('alice');
  });
});

describe('expiry', () => {
  it('leaves out a run whose keys expired, and drops it from the index it was met in', async () => {
    const tenant = `gone-${randomUUID().slice(0, 8)}`;
    const kept = await submit(tenant, ok);
    const gone = await submit(tenant, ok);
    await settled(tenant, kept);
    await settled(tenant, gone);
    // What the retention TTL does when it runs out.
    await redis.del(...runKeyList(runKeys(stack.prefix, gone)));
    expect(ids(await list(tenant, 'status=succeeded'))).toEqual([kept]);
    const keys = runSearchKeys(stack.prefix, tenant);
    expect(await redis.zscore(keys.status('succeeded'), gone)).toBeNull();
    expect(ids(await list(tenant, ''))).toEqual([kept]);
    expect(await redis.zscore(keys.all, gone)).toBeNull();
  });
});
