/**
 * Tetraloop on a real Redis Cluster: three masters started here (redis-server --cluster-enabled,
 * joined by redis-cli --cluster create), the run queues in three shards. The API and the plan and
 * sense pools run in this process; the tool pool in worker processes, so one can be killed
 * mid-node. Proves the run path (a diamond, a crash and its resume), a session lane, the accept
 * path and runs search on the cluster, and that the shards' queues live on different masters.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { RunDocument } from '@tetraloop/core/domain';
import { AcceptBarrier } from '@tetraloop/core/durability';
import { queueLayout } from '@tetraloop/core/queues';
import { RunRequest } from '@tetraloop/core/runs';
import {
  connectRedis,
  isRedisUnavailable,
  startRedisCluster,
  type RedisClient,
  type RedisClusterServer,
} from '@tetraloop/core/runtime';
import { ApiKeyStore, RunStore, purgeTenant, keySlot, queuedRunsKey } from '@tetraloop/core/state';
import { slotOwner } from '../support/cluster-slots.js';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { startModelServer, type ModelServer } from '../support/model-server.js';
import { post, postRun, startStack, waitFor, type Stack } from '../support/stack.js';
import { overlaps, startToolServer, type ToolServer } from '../support/tool-server.js';

const SHARDS = 3;
let cluster: RedisClusterServer;
let stack: Stack;
let tools: ToolServer;
let model: ModelServer;
let redis: RedisClient;
const workers: Spawned[] = [];

beforeAll(async () => {
  [cluster, tools, model] = await Promise.all([
    startRedisCluster({ masters: 3 }),
    startToolServer(),
    startModelServer({
      script: (r) => ({
        content: `echo: ${[...r.messages].reverse().find((m) => m.role === 'user')?.content ?? ''}`,
        latencyMs: 200,
      }),
    }),
  ]);
  stack = await startStack({
    pools: ['sense', 'plan'],
    env: {
      REDIS_URL: cluster.url,
      TETRALOOP_QUEUE_SHARDS: String(SHARDS),
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Short locks so the killed worker's job is found stalled within seconds.
      TETRALOOP_LOCK_DURATION_MS: '2000',
      TETRALOOP_STALLED_INTERVAL_MS: '1000',
    },
  });
  redis = connectRedis(cluster.url, 'worker', 'cluster-test');
  await startWorker();
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill('SIGKILL')));
  await stack?.close();
  redis?.disconnect();
  await Promise.all([cluster?.stop(), tools?.close(), model?.close()]);
});

async function startWorker(): Promise<Spawned> {
  const worker = spawnTetraloop(['worker', '--pool', 'tool'], stack.env);
  workers.push(worker);
  await stderrMatches(worker, /worker ready/);
  return worker;
}

const http = (id: string, ms: number) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${tools.url}/work?node=${id}&ms=${ms}` },
});

describe('on a 3-master Redis Cluster with 3 queue shards', () => {
  it('puts each shard of the run queues on its own master, with jobs in them', async () => {
    const layout = queueLayout(stack.prefix, { clustered: true, shards: SHARDS });
    const masters = await Promise.all(
      layout.shards.map((p) => slotOwner(cluster.masters[0]!, `${p}:tool:id`)),
    );
    expect(new Set(masters).size).toBe(SHARDS);
    // A shard's plan and tool queues share its slot: a run's flow lives in one slot.
    for (const p of layout.shards) expect(keySlot(`${p}:plan:id`)).toBe(keySlot(`${p}:tool:id`));
    // Runs spread over the shards: several runs leave job ids counters in more than one shard.
    const runs = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        postRun(stack.url, { graph: { nodes: [http(`s${i}`, 10)], edges: [] } }),
      ),
    );
    await Promise.all(runs.map((r) => waitFor(stack.url, r.body.runId as string)));
    const used = await Promise.all(layout.shards.map((p) => redis.exists(`${p}:plan:meta`)));
    expect(used.filter((e) => e === 1).length).toBeGreaterThan(1);
  });

  it('counts a redirection a cluster client could not follow as Redis away, and a plain client’s as a fault', async () => {
    // A node that does not serve a key's slot answers MOVED, as a cluster mid-failover does to a
    // client that has not learnt the new owner yet.
    const key = `moved-probe-${randomUUID()}`;
    const owner = await slotOwner(cluster.masters[0]!, key);
    const other = new Redis(cluster.masters.find((m) => m !== owner)!);
    try {
      const moved = await other.get(key).then(
        () => new Error('the command succeeded'),
        (err: unknown) => err,
      );
      expect(String(moved)).toMatch(/^ReplyError: MOVED /);
      // From a cluster client: the API answers 503 and a job tries again.
      expect(isRedisUnavailable(moved, { clustered: true })).toBe(true);
      // From a plain client: REDIS_URL names one node of a cluster, a configuration error (500, logged).
      expect(isRedisUnavailable(moved)).toBe(false);
    } finally {
      other.disconnect();
    }
    // What ioredis's Cluster rejects with once it gives up following them.
    const gaveUp = new Error('Too many Cluster redirections. Last error: Error: Connection is closed.');
    expect(isRedisUnavailable(gaveUp, { clustered: true })).toBe(true);
  });

  it('runs a diamond with every node once and the middle branches concurrently', async () => {
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [http('a', 10), http('b', 300), http('c', 300), http('d', 10)],
        edges: [
          ['a', 'b'],
          ['a', 'c'],
          ['b', 'd'],
          ['c', 'd'],
        ],
      },
      tags: ['diamond'],
    });
    const doc = await waitFor(stack.url, posted.body.runId as string);
    expect(doc.status).toBe('succeeded');
    for (const id of ['a', 'b', 'c', 'd']) expect(tools.hitsOf(id)).toHaveLength(1);
    expect(overlaps(tools.hitsOf('b')[0]!, tools.hitsOf('c')[0]!)).toBe(true);
    expect(doc.output).toEqual({ d: expect.objectContaining({ status: 200, body: { node: 'd', ms: 10 } }) });
    // Its start took it off the index of queued runs, in that index's own slot.
    expect(await redis.zscore(queuedRunsKey(stack.prefix), doc.runId)).toBeNull();

    // Runs search: its indexes are written beside the run scripts, in their own slots.
    const list = async (query: string): Promise<string[]> => {
      const res = await fetch(`${stack.url}/v1/runs?${query}`);
      expect(res.status).toBe(200);
      return ((await res.json()) as { runs: { runId: string }[] }).runs.map((r) => r.runId);
    };
    expect(await list('tag=diamond')).toEqual([doc.runId]);
    expect(await list('status=succeeded&tag=diamond')).toEqual([doc.runId]);
    expect(await list('status=running&tag=diamond')).toEqual([]);
    expect(await list('limit=200')).toContain(doc.runId);
  });

  it('accepts a run once per Idempotency-Key', async () => {
    const key = `cluster-${randomUUID()}`;
    const body = { graph: { nodes: [http('once', 10)], edges: [] } };
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => postRun(stack.url, body, { 'idempotency-key': key })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(5).fill(202));
    expect(new Set(answers.map((a) => a.body.runId)).size).toBe(1);
    expect((await waitFor(stack.url, answers[0]!.body.runId as string)).status).toBe('succeeded');
    expect(tools.hitsOf('once')).toHaveLength(1);
  });

  it('waits for replicas on every master: a barrier key in each one’s slots', async () => {
    const barrier = await AcceptBarrier.open(redis, stack.prefix, {
      replicas: 1,
      waitAof: 'off',
      waitMs: 50,
    });
    // No master has a replica: every WAIT answers 0, none fails across slots.
    expect(await barrier!.confirm()).toEqual({ code: 'not_replicated', wanted: 1, acknowledged: 0 });
    const barriers = await Promise.all(
      cluster.masters.map(async (url) => {
        const node = new Redis(url);
        const [, keys] = await node.scan('0', 'MATCH', `${stack.prefix}:accept:barrier:*`, 'COUNT', 1000);
        node.disconnect();
        return keys.length;
      }),
    );
    expect(barriers).toEqual([1, 1, 1]);
  });

  it('runs a session lane’s two messages in order', async () => {
    const say = async (text: string): Promise<string> => {
      const res = await post(stack.url, '/v1/sessions/cluster-lane/messages', { text, mode: 'followup' });
      expect(res.status).toBe(202);
      return res.body.runId as string;
    };
    const first = await say('first');
    const second = await say('second');
    const [d1, d2] = (await Promise.all([first, second].map((id) => waitFor(stack.url, id)))) as [
      RunDocument,
      RunDocument,
    ];
    expect(d1.status).toBe('succeeded');
    expect(d2.status).toBe('succeeded');
    expect(Date.parse(d2.startedAt!)).toBeGreaterThanOrEqual(Date.parse(d1.finishedAt!));
    expect(d2.nodes.agent).toMatchObject({ output: { text: 'echo: second' } });
  });

  it('deletes a tenant’s runs and keys on every master', async () => {
    const prefix = stack.prefix;
    const store = new RunStore(redis, { prefix, retentionSeconds: 60 });
    const keys = new ApiKeyStore(redis, { prefix, maxPerTenant: 10 });
    const tenant = `gone-${randomUUID().slice(0, 8)}`;
    await keys.create({ tenant, scopes: ['runs:read'], name: 'k' });
    const runIds: string[] = [];
    for (let i = 0; i < 6; i++) {
      const made = await stack.api.runs.submit(
        RunRequest.parse({ graph: { nodes: [http(`gone${i}`, 10)], edges: [] } }),
        undefined,
        { tenant, start: false },
      );
      runIds.push(made.runId);
    }
    // Keys of the tenant in slots of every master.
    await Promise.all(
      Array.from({ length: 30 }, (_, i) => redis.set(`${prefix}:blob:${tenant}~${i}`, '"x"')),
    );
    const purged = await purgeTenant({ redis, prefix, store, keys }, tenant);
    expect(purged).toMatchObject({ keys: 1, runs: 6 });
    for (const url of cluster.masters) {
      const node = new Redis(url);
      const [, left] = await node.scan('0', 'MATCH', `${prefix}:*${tenant}*`, 'COUNT', 10_000);
      node.disconnect();
      expect(left).toEqual([]);
    }
    for (const runId of runIds) expect(await store.document(runId)).toBeNull();
  });

  it('finishes a chain on a second worker after the first is killed mid-node', async () => {
    const ids = Array.from({ length: 5 }, (_, i) => `k${i}`);
    const posted = await postRun(stack.url, {
      graph: {
        nodes: ids.map((id) => http(id, id === 'k2' ? 3000 : 50)),
        edges: ids.slice(1).map((id, i) => [ids[i], id]),
      },
    });
    await tools.hitCount('k2', 1);
    await workers[0]!.kill('SIGKILL');
    await startWorker();
    const doc = await waitFor(stack.url, posted.body.runId as string, 60_000);
    expect(doc.status).toBe('succeeded');
    for (const id of ids) expect(tools.hitsOf(id), id).toHaveLength(id === 'k2' ? 2 : 1);
    const [before, after] = tools.hitsOf('k2');
    expect(after!.idempotencyKey).toBe(before!.idempotencyKey);
  });
});
