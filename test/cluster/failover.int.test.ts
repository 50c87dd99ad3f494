/**
 * Tetraloop through a Redis Cluster failover: three masters with a replica each, the run queues in
 * three shards, the API and every pool in this process. While a chain runs, the replicas of the
 * masters that hold its run keys and its shard's queues take over (`CLUSTER FAILOVER`, the
 * promotion an operator or a managed cluster makes for maintenance), and the run finishes with
 * every node once; runs accepted after the failover run on the new masters.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { RunDocument } from '@tetraloop/core/domain';
import { queueLayout, runJobId, shardOfRunId } from '@tetraloop/core/queues';
import { connectRedis, startRedisCluster, type RedisClusterServer } from '@tetraloop/core/runtime';
import { keySlot } from '@tetraloop/core/state';
import { slotOwner, slotOwners } from '../support/cluster-slots.js';
import { postRun, startStack, waitFor, type Stack } from '../support/stack.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

const SHARDS = 3;
let cluster: RedisClusterServer;
let stack: Stack;
let tools: ToolServer;

beforeAll(async () => {
  [cluster, tools] = await Promise.all([
    startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 3000 }),
    startToolServer(),
  ]);
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    // A job whose master was killed under it may still count as active at the end: the stack then
    // closes after this grace (and a forced close), within the hook's time.
    env: {
      REDIS_URL: cluster.url,
      TETRALOOP_QUEUE_SHARDS: String(SHARDS),
      TETRALOOP_SHUTDOWN_GRACE_MS: '5000',
      // What the workers meet in a failover (a handed-off node moved, a job stalled or failed) is
      // in the output, with its time: a run that does not settle is then read from it.
      LOG_LEVEL: 'warn',
    },
  });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await Promise.all([cluster?.stop(), tools?.close()]);
}, 60_000);

const http = (id: string, ms: number) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${tools.url}/work?node=${id}&ms=${ms}` },
});

/** Submits a chain of `http` nodes, each taking `ms(id)`, and answers its run id. */
async function startChain(ids: readonly string[], ms: (id: string) => number): Promise<string> {
  const posted = await postRun(stack.url, {
    graph: {
      nodes: ids.map((id) => http(id, ms(id))),
      edges: ids.slice(1).map((id, i) => [ids[i], id]),
    },
  });
  expect(posted.status).toBe(202);
  return posted.body.runId as string;
}

/** Which of `cluster.masters` (as created) serves `key`'s slot now. */
const masterIndexOf = async (key: string): Promise<number> =>
  cluster.masters.indexOf(await slotOwner(cluster.nodes[0]!, key));

/** What a wait answered on the way: its status, its Retry-After, how long it took (ms). */
interface WaitAnswer {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly tookMs: number;
}

/** The `timeoutMs` each wait of `waitRetrying` asks for. */
const WAIT_MS = 5000;

/**
 * Waits for a run to settle as a client does through a failover: a wait that ends unsettled
 * (202) is asked again, a 503 after its Retry-After, up to 60 s in all. Answers the document and
 * every answer met on the way.
 */
async function waitRetrying(runId: string): Promise<{ doc: RunDocument; answers: WaitAnswer[] }> {
  const answers: WaitAnswer[] = [];
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const started = performance.now();
    const res = await fetch(`${stack.url}/v1/runs/${runId}/wait?timeoutMs=${WAIT_MS}`);
    const body = await res.text();
    answers.push({
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      tookMs: performance.now() - started,
    });
    if (res.status === 200) return { doc: JSON.parse(body) as RunDocument, answers };
    // 202: not settled within this wait, ask again; a 503 after its Retry-After. Kept as a wait:
    // it is the behaviour under test (a client that honours Retry-After gets through a failover,
    // and the API asks for 1 s), its length is the server's answer, not a guess of the test's, and
    // nothing is assumed after it: the loop ends on the run's answer or at its deadline.
    if (res.status !== 202) {
      await new Promise((r) => setTimeout(r, Number(res.headers.get('retry-after') ?? 1) * 1000));
    }
  }
  throw new Error(
    `run ${runId} did not settle within 60 s (answers: ${JSON.stringify(answers)}; ` +
      `${await runState(runId)})`,
  );
}

/**
 * Where a run that did not settle stands, for the failure message: each node's status, attempts
 * (with the job that carried each) and calls the tool server saw; its root job's BullMQ state, and
 * the node jobs it still waits for with theirs.
 */
async function runState(runId: string): Promise<string> {
  let state: string;
  try {
    const doc = (await (await fetch(`${stack.url}/v1/runs/${runId}`)).json()) as RunDocument;
    const nodes = Object.values(doc.nodes).map((n) => ({
      id: n.id,
      status: n.status,
      attempts: n.attempts.map((a) => ({ n: a.attempt, error: a.error?.code, carriedBy: a.carriedBy })),
      calls: tools.hitsOf(n.id).length,
    }));
    state = `run ${doc.status}, nodes ${JSON.stringify(nodes)}`;
  } catch (err) {
    state = `its document could not be read: ${String(err)}`;
  }
  return `${state}; ${await rootJobState(runId)}; ${planWorkersState(runId)}`;
}

/**
 * What the plan workers of the run's shard are doing, read from BullMQ's `Worker` internals: a
 * root job waiting that no worker takes is read from here (whether each is running, drained, how
 * many jobs it holds, how long it blocks, and its connections' states).
 */
function planWorkersState(runId: string): string {
  const bullPrefix = queueLayout(stack.prefix, { clustered: true, shards: SHARDS }).shards[
    shardOfRunId(runId, SHARDS)
  ]!;
  const workers = (stack.pools?.workers.get('plan') ?? []).filter((w) => w.opts.prefix === bullPrefix);
  return `plan workers: ${JSON.stringify(
    workers.map((w) => {
      const inside = w as unknown as {
        drained?: boolean;
        waiting?: unknown;
        blockUntil?: number;
        limitUntil?: number;
        closing?: unknown;
        paused?: boolean;
        mainLoopQueue?: { numTotal(): number } | null;
        backend?: {
          blockingConnection?: { status?: string; _client?: { status?: string } };
          connection?: { status?: string; _client?: { status?: string } };
        };
      };
      return {
        running: w.isRunning(),
        drained: inside.drained,
        waiting: inside.waiting != null,
        blockUntil: inside.blockUntil,
        limitUntil: inside.limitUntil,
        closing: Boolean(inside.closing),
        paused: inside.paused,
        jobs: inside.mainLoopQueue?.numTotal(),
        blocking: [
          inside.backend?.blockingConnection?.status,
          inside.backend?.blockingConnection?._client?.status,
        ],
        connection: [inside.backend?.connection?.status, inside.backend?.connection?._client?.status],
      };
    }),
  )}`;
}

/** The run's root job's BullMQ state and each node job it still waits for, with that job's state. */
async function rootJobState(runId: string): Promise<string> {
  const layout = queueLayout(stack.prefix, { clustered: true, shards: SHARDS });
  const bullPrefix = layout.shards[shardOfRunId(runId, SHARDS)]!;
  const connection = connectRedis(cluster.url, 'client', 'failover-test');
  const plan = new Queue('plan', { connection, prefix: bullPrefix });
  const tool = new Queue('tool', { connection, prefix: bullPrefix });
  try {
    const root = await Job.fromId(plan, runJobId(runId));
    if (!root) return 'root job: gone';
    const { processed, unprocessed, failed, ignored } = await root.getDependencies();
    const pending = await Promise.all(
      (unprocessed ?? []).map(async (key) => {
        const id = key.split(':').at(-1)!;
        return `${id} ${await tool.getJobState(id)}`;
      }),
    );
    return (
      `root job ${await root.getState()} (step ${String((root.data as { step?: string }).step)}), ` +
      `waits for [${pending.join(', ')}]; processed ${Object.keys(processed ?? {}).length}, ` +
      `failed ${JSON.stringify(failed ?? [])}, ignored ${JSON.stringify(Object.keys(ignored ?? {}))}`
    );
  } catch (err) {
    return `its root job could not be read: ${String(err)}`;
  } finally {
    await Promise.all([plan.close(), tool.close()]).catch(() => undefined);
    connection.disconnect();
  }
}

/**
 * Every node ran: once if none of its calls was in flight during `[from, to]` (the move, the kill), and at
 * most twice with the same idempotency key if they did: a node in flight while its keys or its
 * job moved may be run again (at least once), as after a worker crash, never lost.
 */
function expectOnceOutside(ids: readonly string[], from: number, to: number): void {
  for (const id of ids) {
    const hits = tools.hitsOf(id);
    const during = hits.some((h) => h.start <= to && (h.end ?? Infinity) >= from);
    if (!during) expect(hits, id).toHaveLength(1);
    else {
      expect(hits.length, id).toBeGreaterThanOrEqual(1);
      expect(hits.length, id).toBeLessThanOrEqual(2);
      expect(new Set(hits.map((h) => h.idempotencyKey)).size, id).toBe(1);
    }
  }
}

/** A hash tag whose slot is `slot` (found by trying; any key tagged with it lives in that slot). */
function slotKeyTag(slot: number): string {
  for (let n = 0; ; n++) if (keySlot(`tag-${n}`) === slot) return `tag-${n}`;
}

/**
 * Moves one slot and its keys between masters as `redis-cli --cluster reshard` does: the target
 * imports, the source migrates, the keys go over with MIGRATE in batches, then the target, the
 * source and every other master are told the new owner. Clients in between get ASK, TRYAGAIN and then MOVED.
 */
async function moveSlot(slot: number, fromUrl: string, toUrl: string): Promise<void> {
  const from = new Redis(fromUrl);
  const to = new Redis(toUrl);
  try {
    const [fromId, toId] = await Promise.all([from.cluster('MYID'), to.cluster('MYID')]);
    await to.cluster('SETSLOT', slot, 'IMPORTING', fromId);
    await from.cluster('SETSLOT', slot, 'MIGRATING', toId);
    const port = Number(new URL(toUrl).port);
    for (;;) {
      const batch = await from.cluster('GETKEYSINSLOT', slot, 50);
      if (batch.length === 0) break;
      await from.migrate('127.0.0.1', port, '', 0, 5000, 'KEYS', ...batch);
    }
    // The new owner first, then the old one, then the rest (as Redis's reshard docs order it),
    // so no client is sent back and forth between the two.
    await to.cluster('SETSLOT', slot, 'NODE', toId);
    await from.cluster('SETSLOT', slot, 'NODE', toId);
    for (const url of await slotOwners(cluster.nodes[0]!)) {
      if (url === fromUrl || url === toUrl) continue;
      const node = new Redis(url);
      try {
        await node.cluster('SETSLOT', slot, 'NODE', toId);
      } finally {
        node.disconnect();
      }
    }
  } finally {
    from.disconnect();
    to.disconnect();
  }
}

/**
 * Promotes master `index`'s replica with `CLUSTER FAILOVER` (the replica catches up with its
 * master, then takes its slots) and resolves once it reports itself master of them.
 */
async function failOver(index: number): Promise<void> {
  const replica = new Redis(cluster.replicas[index]![0]!);
  try {
    await replica.cluster('FAILOVER');
    await vi.waitFor(
      async () => {
        const role = (await replica.role()) as unknown as [string];
        const state = await replica.cluster('INFO');
        if (role[0] !== 'master' || !state.includes('cluster_state:ok')) {
          throw new Error(`the replica of master ${index} was not promoted within 20 s (role ${role[0]})`);
        }
      },
      { timeout: 20_000, interval: 50 },
    );
  } finally {
    replica.disconnect();
  }
}

describe('on a 3-master Redis Cluster with a replica each', () => {
  it('finishes a run whose masters fail over mid-run, every node once, and runs more after', async () => {
    const ids = Array.from({ length: 8 }, (_, i) => `f${i}`);
    const runId = await startChain(ids, () => 300);
    const layout = queueLayout(stack.prefix, { clustered: true, shards: SHARDS });
    const shardPrefix = layout.shards[shardOfRunId(runId, SHARDS)]!;
    const masters = new Set([
      await masterIndexOf(`${stack.prefix}:run:{${runId}}`),
      await masterIndexOf(`${shardPrefix}:tool:id`),
    ]);
    await tools.hitCount('f1', 1);
    for (const index of masters) await failOver(index);
    // Mid-run: the chain's last node has not been called yet.
    expect(tools.hitsOf('f7')).toEqual([]);

    const doc = await waitFor(stack.url, runId, 60_000);
    expect(doc.status).toBe('succeeded');
    for (const id of ids) expect(tools.hitsOf(id), id).toHaveLength(1);
    // The masters the run lived on are replicas now: its keys moved with the promotion.
    for (const index of masters) {
      const old = new Redis(cluster.masters[index]!);
      try {
        expect(((await old.role()) as unknown as [string])[0]).toBe('slave');
      } finally {
        old.disconnect();
      }
    }
    // Accepts, the queues and the workers all follow the new masters.
    const after = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        postRun(stack.url, {
          graph: {
            nodes: [http(`after${i}a`, 10), http(`after${i}b`, 10)],
            edges: [[`after${i}a`, `after${i}b`]],
          },
        }),
      ),
    );
    for (const posted of after) {
      expect(posted.status).toBe(202);
      expect((await waitFor(stack.url, posted.body.runId as string, 30_000)).status).toBe('succeeded');
    }
  }, 90_000);

  it('finishes a run whose slots move to another master mid-run (resharding)', async () => {
    const ids = Array.from({ length: 8 }, (_, i) => `m${i}`);
    const runId = await startChain(ids, () => 300);
    const layout = queueLayout(stack.prefix, { clustered: true, shards: SHARDS });
    const keys = [`${stack.prefix}:run:{${runId}}`, `${layout.shards[shardOfRunId(runId, SHARDS)]!}:tool:id`];
    await tools.hitCount('m1', 1);
    const moveStart = Date.now();
    const moved: [number, string, string][] = [];
    for (const key of keys) {
      const from = await slotOwner(cluster.nodes[0]!, key);
      const to = (await slotOwners(cluster.nodes[0]!)).find((m) => m !== from)!;
      if (moved.some(([slot]) => slot === keySlot(key))) continue;
      await moveSlot(keySlot(key), from, to);
      moved.push([keySlot(key), from, to]);
    }
    const moveEnd = Date.now();
    expect(tools.hitsOf('m7')).toEqual([]);
    const doc = await waitFor(stack.url, runId, 60_000);
    expect(doc.status).toBe('succeeded');
    expectOnceOutside(ids, moveStart, moveEnd);
    for (const [slot, , to] of moved)
      expect(await slotOwner(cluster.nodes[0]!, `{${slotKeyTag(slot)}}`)).toBe(to);
    const after = await postRun(stack.url, { graph: { nodes: [http('after-move', 10)], edges: [] } });
    expect((await waitFor(stack.url, after.body.runId as string, 30_000)).status).toBe('succeeded');
  }, 90_000);

  it('finishes a run whose master is killed mid-run, once its replica has taken over', async () => {
    const ids = Array.from({ length: 5 }, (_, i) => `k${i}`);
    const runId = await startChain(ids, (id) => (id === 'k1' ? 1500 : 100));
    const master = await slotOwner(cluster.nodes[0]!, `${stack.prefix}:run:{${runId}}`);
    await tools.hitCount('k1', 1);
    // What this test loses is the master, not an acknowledged write: the replica has the run's
    // writes before the kill. WAIT covers this connection's own writes, so it writes in the run's
    // slot: once the replica has that, it has every write before it on that master too.
    const direct = new Redis(master);
    // A node that completes after the probe's write may have its completion lost with the master
    // (replication is asynchronous): on a slow machine k1 can end before the kill, and run again.
    const probedAt = Date.now();
    try {
      await direct.set(`failover-probe:{${runId}}`, '1', 'PX', 60_000);
      expect(await direct.wait(1, 5000)).toBeGreaterThanOrEqual(1);
    } finally {
      direct.disconnect();
    }
    const killedAt = Date.now();
    process.kill(cluster.pids[cluster.nodes.indexOf(master)]!, 'SIGKILL');

    // Until the replica is promoted (cluster-node-timeout, 3 s here) the API answers 503 with
    // Retry-After at once rather than hang; a client retries, and it serves again on its own.
    const { doc, answers } = await waitRetrying(runId);
    expect(doc.status).toBe('succeeded');
    // Every answer is the run, a wait that timed out, or 503 with Retry-After; none hangs past
    // its wait (a Redis request fails fast rather than queueing while the slot has no master).
    expect(answers.filter((a) => ![200, 202, 503].includes(a.status))).toEqual([]);
    expect(answers.filter((a) => a.status === 503 && a.retryAfter !== '1')).toEqual([]);
    expect(answers.filter((a) => a.tookMs > WAIT_MS + 3000)).toEqual([]);
    // k1 was in flight on the dead master's watch: it may run again (at least once), never lost.
    expectOnceOutside(ids, probedAt, killedAt);
    const after = await postRun(stack.url, { graph: { nodes: [http('after-kill', 10)], edges: [] } });
    expect((await waitFor(stack.url, after.body.runId as string, 30_000)).status).toBe('succeeded');
  }, 90_000);
});
