/**
 * Node handoff on a real Redis: a node job runs the nodes it releases itself, so a chain takes one
 * job, and a fan-out's branches run side by side in the job that released them, up to
 * TETRALOOP_NODE_HANDOFF_WIDTH (one job per branch past it); a handed-off node that has to wait (a
 * retry, a flow-control hold) moves to a job of its own and keeps its attempts, counted and charged
 * once; a carrying job that dies leaves its nodes to its redelivery. A new run's first ready nodes
 * start in carrier jobs, up to the width each, which recover the same way.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnTetraloop, stderrMatches, type Spawned } from './support/processes.js';
import {
  postRun,
  readEvents,
  runToEnd,
  startStack,
  untilEvent,
  waitFor,
  type Stack,
} from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let server: ToolServer;
let stack: Stack;
let limited: Stack;
let plain: Stack;
/** Handoff one node at a time (TETRALOOP_NODE_HANDOFF_WIDTH=1). */
let narrow: Stack;
/** Its tool pool in worker processes, one of which is killed. */
let crashing: Stack;
const workers: Spawned[] = [];

beforeAll(async () => {
  server = await startToolServer();
  [stack, limited, plain, narrow] = await Promise.all([
    startStack(),
    // Every call passes a flow limit: a handed-off node asks for it from a job of its own.
    startStack({
      env: { TETRALOOP_LIMITS: JSON.stringify({ limits: [{ name: 'all', key: 'tool', concurrency: 50 }] }) },
    }),
    startStack({ env: { TETRALOOP_NODE_HANDOFF: '0' } }),
    startStack({ env: { TETRALOOP_NODE_HANDOFF_WIDTH: '1' } }),
  ]);
  crashing = await startStack({
    pools: ['plan'],
    // Short locks so the killed worker's job is found stalled within seconds; three nodes at once
    // per job.
    env: {
      TETRALOOP_LOCK_DURATION_MS: '2000',
      TETRALOOP_STALLED_INTERVAL_MS: '1000',
      TETRALOOP_NODE_HANDOFF_WIDTH: '3',
    },
  });
  await startWorker();
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill('SIGKILL')));
  await Promise.all([stack?.close(), limited?.close(), plain?.close(), narrow?.close(), crashing?.close()]);
  await server?.close();
});

const call = (id: string, path = '/work?ms=5') => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}${path}&node=${id}` },
});

/** The node jobs added to the tool queue for a run, by node id, read from BullMQ's event stream. */
async function nodeJobsAdded(of: Stack, runId: string): Promise<string[]> {
  const redis = new Redis(of.env.REDIS_URL!);
  try {
    const entries = await redis.xrange(`${of.prefix}:tool:events`, '-', '+');
    return entries
      .map(([, fields]) => Object.fromEntries(fields.flatMap((f, i) => (i % 2 ? [] : [[f, fields[i + 1]]]))))
      .filter((e) => e.event === 'added' && String(e.jobId).startsWith(`${runId}.`))
      .map((e) => String(e.jobId).slice(runId.length + 1))
      .sort();
  } finally {
    redis.disconnect();
  }
}

async function startWorker(): Promise<void> {
  const worker = spawnTetraloop(['worker', '--pool', 'tool'], crashing.env);
  workers.push(worker);
  await stderrMatches(worker, /worker ready/);
}

const chain = (ids: string[], node = (id: string) => call(id)) => ({
  graph: { nodes: ids.map(node), edges: ids.slice(1).map((id, i) => [ids[i]!, id]) },
});

/** `<p>-src` → `<p>-a`, `<p>-b`, `<p>-c` → `<p>-join`; the branches made by `branch`. */
const fanOut = (p: string, branch = (id: string) => call(id)) => ({
  graph: {
    nodes: [call(`${p}-src`), branch(`${p}-a`), branch(`${p}-b`), branch(`${p}-c`), call(`${p}-join`)],
    edges: [
      [`${p}-src`, `${p}-a`],
      [`${p}-src`, `${p}-b`],
      [`${p}-src`, `${p}-c`],
      [`${p}-a`, `${p}-join`],
      [`${p}-b`, `${p}-join`],
      [`${p}-c`, `${p}-join`],
    ],
  },
});

describe('node handoff', () => {
  it('runs a chain in one job, every node with its own start, snapshot and events', async () => {
    const ids = ['c0', 'c1', 'c2', 'c3', 'c4', 'c5'];
    const doc = await runToEnd(stack.url, chain(ids));
    expect(doc.status).toBe('succeeded');
    expect(await nodeJobsAdded(stack, doc.runId)).toEqual(['c0']);
    for (const id of ids) {
      expect(doc.nodes[id]).toMatchObject({ status: 'succeeded', attempts: [{ attempt: 1 }] });
      expect(server.hitsOf(id)).toHaveLength(1);
    }
    expect(doc.usage.toolCalls).toBe(ids.length);
    const events = (await readEvents(stack.url, doc.runId)).map((e) => e.data);
    const lifecycle = new Set(['node.queued', 'node.started', 'node.succeeded']);
    for (const id of ids.slice(1)) {
      const mine = events.filter((e) => e.nodeId === id && lifecycle.has(e.type)).map((e) => e.type);
      expect(mine, id).toEqual(['node.queued', 'node.started', 'node.succeeded']);
    }
    // One after the other: each started after the one it depends on finished.
    for (let i = 1; i < ids.length; i++) {
      expect(server.hitsOf(ids[i]!)[0]!.start).toBeGreaterThanOrEqual(server.hitsOf(ids[i - 1]!)[0]!.end!);
    }
  });

  it("runs a fan-out's branches side by side in the source's job, the join handed off by the last", async () => {
    // Each branch is held until all three have called: they run at once, in one job.
    const posted = await postRun(
      stack.url,
      fanOut('w', (id) => call(id, `/gate?x=1`)),
    );
    const runId = posted.body.runId as string;
    for (const id of ['w-a', 'w-b', 'w-c']) await server.hitCount(id, 1);
    for (const id of ['w-a', 'w-b', 'w-c']) server.openGate(id);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    expect(await nodeJobsAdded(stack, runId)).toEqual(['w-src']);
    for (const id of ['w-a', 'w-b', 'w-c', 'w-join']) {
      expect(
        doc.nodes[id]!.attempts.map((a) => a.carriedBy),
        id,
      ).toEqual([`${runId}.w-src`]);
    }
    expect(doc.usage.toolCalls).toBe(5);
  });

  it('runs a fan-out with one job per branch past the width, the join handed off', async () => {
    const doc = await runToEnd(narrow.url, fanOut('f'));
    expect(doc.status).toBe('succeeded');
    const added = await nodeJobsAdded(narrow, doc.runId);
    // The source's job runs one branch; the other two get jobs; the join gets none.
    expect(added).toHaveLength(3);
    expect(added).toContain('f-src');
    expect(added).not.toContain('f-join');
    expect(doc.nodes['f-join']!.status).toBe('succeeded');
  });

  it('moves a handed-off node that fails to a job of its own for its retry, keeping its attempts', async () => {
    const doc = await runToEnd(
      stack.url,
      chain(['r0', 'r1', 'r2'], (id) => (id === 'r1' ? call(id, '/flaky?fail=1&status=503') : call(id))),
    );
    expect(doc.status).toBe('succeeded');
    const attempts = doc.nodes.r1!.attempts;
    expect(attempts.map((a) => [a.attempt, a.error?.code ?? 'ok'])).toEqual([
      [1, 'server'],
      [2, 'ok'],
    ]);
    // The recorded backoff was honoured by the new job's delay.
    const [first, second] = server.hitsOf('r1');
    expect(second!.start - first!.end!).toBeGreaterThanOrEqual(attempts[0]!.retryDelayMs! - 5);
    // r1's retry got a job, which handed off r2.
    expect(await nodeJobsAdded(stack, doc.runId)).toEqual(['r0', 'r1']);
    expect(doc.usage.toolCalls).toBe(4);
  });

  it('moves a handed-off node under a flow limit to a job of its own, counted and charged once', async () => {
    const ids = ['l0', 'l1', 'l2'];
    const doc = await runToEnd(limited.url, chain(ids));
    expect(doc.status).toBe('succeeded');
    expect(await nodeJobsAdded(limited, doc.runId)).toEqual(ids);
    for (const id of ids)
      expect(doc.nodes[id]).toMatchObject({ status: 'succeeded', attempts: [{ attempt: 1 }] });
    expect(doc.usage.toolCalls).toBe(ids.length);
    // The move re-enters the same attempt: not executed or counted twice.
    for (const id of ids) expect(server.hitsOf(id)).toHaveLength(1);
  });

  it('counts and charges the retries a moved node makes in its own job', async () => {
    const doc = await runToEnd(
      limited.url,
      chain(['mr0', 'mr1'], (id) => (id === 'mr1' ? call(id, '/flaky?fail=1&status=503') : call(id))),
    );
    expect(doc.status).toBe('succeeded');
    // mr1 moved to its own job for the flow limit; its retry there is a new attempt and call.
    expect(doc.nodes.mr1!.attempts.map((a) => [a.attempt, a.error?.code ?? 'ok'])).toEqual([
      [1, 'server'],
      [2, 'ok'],
    ]);
    expect(server.hitsOf('mr1')).toHaveLength(2);
    expect(doc.usage.toolCalls).toBe(3);
  });

  it('gives every node a job of its own with TETRALOOP_NODE_HANDOFF=0', async () => {
    const ids = ['p0', 'p1', 'p2'];
    const doc = await runToEnd(plain.url, chain(ids));
    expect(doc.status).toBe('succeeded');
    expect(await nodeJobsAdded(plain, doc.runId)).toEqual(ids);
  });

  it('runs at most the width of nodes at once in one job, when branches release more', async () => {
    // src → a, b; a → a1..a3; b → b1..b3, the six held until all have called. Width 3: src's job
    // runs a and b, then a's completion takes two places and b's the one left; three get jobs.
    const leaf = (id: string) => call(id, '/gate?x=1');
    const leaves = ['n-a1', 'n-a2', 'n-a3', 'n-b1', 'n-b2', 'n-b3'];
    const posted = await postRun(crashing.url, {
      graph: {
        nodes: [call('n-src'), call('n-a'), call('n-b'), ...leaves.map(leaf)],
        edges: [['n-src', 'n-a'], ['n-src', 'n-b'], ...leaves.map((id) => [`n-${id[2]}`, id])],
      },
    });
    const runId = posted.body.runId as string;
    for (const id of leaves) await server.hitCount(id, 1);
    for (const id of leaves) server.openGate(id);
    const doc = await waitFor(crashing.url, runId);
    expect(doc.status).toBe('succeeded');
    const carried = leaves.filter((id) => doc.nodes[id]!.attempts[0]!.carriedBy === `${runId}.n-src`);
    expect(carried).toHaveLength(3);
    expect(await nodeJobsAdded(crashing, runId)).toEqual(
      ['n-src', ...leaves.filter((id) => !carried.includes(id))].sort(),
    );
    for (const id of leaves) expect(server.hitsOf(id), id).toHaveLength(1);
  });

  it('finishes a chain whose carrying job died mid-node: the interrupted node runs again, no other', async () => {
    const ids = ['k0', 'k1', 'k2', 'k3', 'k4'];
    const posted = await postRun(
      crashing.url,
      chain(ids, (id) => (id === 'k2' ? call(id, '/work?ms=3000') : call(id))),
    );
    const runId = posted.body.runId as string;
    // k1 and k2 run handed off in k0's job; the worker dies while k2 runs.
    await server.hitCount('k2', 1);
    await workers[0]!.kill('SIGKILL');
    await startWorker();
    const doc = await waitFor(crashing.url, runId, 60_000);
    expect(doc.status).toBe('succeeded');
    for (const id of ids) expect(server.hitsOf(id), id).toHaveLength(id === 'k2' ? 2 : 1);
    const [before, after] = server.hitsOf('k2');
    expect(after!.idempotencyKey).toBe(before!.idempotencyKey);
    // k0's redelivered job re-completed k0 and k1 (written once) and gave k2 a job of its own,
    // which handed off the rest.
    expect(await nodeJobsAdded(crashing, runId)).toEqual(['k0', 'k2']);
    expect(doc.nodes.k1!.attempts.map((a) => a.carriedBy)).toEqual([`${runId}.k0`]);
    expect(doc.nodes.k3!.attempts.map((a) => a.carriedBy)).toEqual([`${runId}.k2`]);
    expect(doc.usage.toolCalls).toBe(ids.length + 1);
  });

  it('finishes a fan-out whose carrying job died while its branches ran: each runs again in a job of its own', async () => {
    const branches = ['x-a', 'x-b', 'x-c'];
    const posted = await postRun(
      crashing.url,
      fanOut('x', (id) => call(id, '/gate?x=1')),
    );
    const runId = posted.body.runId as string;
    // The three branches run side by side in x-src's job; the worker dies while they wait.
    for (const id of branches) await server.hitCount(id, 1);
    await workers.at(-1)!.kill('SIGKILL');
    for (const id of branches) server.openGate(id);
    await startWorker();
    const doc = await waitFor(crashing.url, runId, 60_000);
    expect(doc.status).toBe('succeeded');
    expect(server.hitsOf('x-src')).toHaveLength(1);
    for (const id of branches) {
      expect(server.hitsOf(id), id).toHaveLength(2);
      const [before, after] = server.hitsOf(id);
      expect(after!.idempotencyKey).toBe(before!.idempotencyKey);
    }
    expect(server.hitsOf('x-join')).toHaveLength(1);
    // x-src's redelivered job re-completed x-src and gave each interrupted branch a job of its own.
    expect(await nodeJobsAdded(crashing, runId)).toEqual(['x-a', 'x-b', 'x-c', 'x-src']);
  });
});

/** `<p>-s0` … `<p>-s<n-1>`, all first nodes, → `<p>-join`; the sources made by `source`. */
const sources = (p: string, n: number, source = (id: string) => call(id)) => {
  const ids = Array.from({ length: n }, (_, i) => `${p}-s${i}`);
  return {
    ids,
    body: {
      graph: {
        nodes: [...ids.map(source), call(`${p}-join`)],
        edges: ids.map((id) => [id, `${p}-join`]),
      },
    },
  };
};

describe('carrier jobs', () => {
  it("starts a new run's first nodes side by side in one job, each begun once, the join handed off", async () => {
    // Each source is held until all five have called: they run at once, in one job.
    const { ids, body } = sources('g', 5, (id) => call(id, '/gate?x=1'));
    const posted = await postRun(stack.url, body);
    const runId = posted.body.runId as string;
    for (const id of ids) await server.hitCount(id, 1);
    for (const id of ids) server.openGate(id);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    // One job for the five and the join: the carrier, named by its first node.
    expect(await nodeJobsAdded(stack, runId)).toEqual(['g-s0+']);
    for (const id of [...ids, 'g-join']) {
      expect(server.hitsOf(id), id).toHaveLength(1);
      expect(
        doc.nodes[id]!.attempts.map((a) => a.carriedBy),
        id,
      ).toEqual([`${runId}.g-s0+`]);
    }
    const events = (await readEvents(stack.url, runId)).map((e) => e.data);
    for (const id of ids) {
      const mine = events.filter((e) => e.nodeId === id && e.type.startsWith('node.')).map((e) => e.type);
      expect(mine, id).toEqual(['node.queued', 'node.started', 'node.succeeded']);
    }
    // The five started in one step.
    expect(new Set(ids.map((id) => doc.nodes[id]!.attempts[0]!.startedAt)).size).toBe(1);
    expect(doc.usage.toolCalls).toBe(6);
  });

  it('gives each carrier up to the width of them, and a node left over a job of its own', async () => {
    // Width 3: seven sources are two carriers of three and a job.
    const { ids, body } = sources('h', 7);
    const doc = await runToEnd(crashing.url, body);
    expect(doc.status).toBe('succeeded');
    expect(await nodeJobsAdded(crashing, doc.runId)).toEqual(['h-s0+', 'h-s3+', 'h-s6']);
    for (const id of ids) expect(server.hitsOf(id), id).toHaveLength(1);
    expect(doc.usage.toolCalls).toBe(8);
  });

  it('gives every first node a job of its own with TETRALOOP_NODE_HANDOFF=0, or width 1', async () => {
    for (const [of, p] of [
      [plain, 'ph'],
      [narrow, 'pw'],
    ] as const) {
      const { ids, body } = sources(p, 3);
      const doc = await runToEnd(of.url, body);
      expect(doc.status).toBe('succeeded');
      expect((await nodeJobsAdded(of, doc.runId)).filter((id) => id !== `${p}-join`)).toEqual(ids);
    }
  });

  it('moves each carried call under a flow limit to a job of its own, each run once', async () => {
    const { ids, body } = sources('fl', 3);
    const doc = await runToEnd(limited.url, body);
    expect(doc.status).toBe('succeeded');
    // The carrier begins the three; each call moves to a job of its own to ask for the limit.
    expect(await nodeJobsAdded(limited, doc.runId)).toEqual(['fl-join', 'fl-s0', 'fl-s0+', 'fl-s1', 'fl-s2']);
    for (const id of ids) {
      expect(server.hitsOf(id), id).toHaveLength(1);
      expect(doc.nodes[id]).toMatchObject({ status: 'succeeded', attempts: [{ attempt: 1 }] });
    }
    expect(doc.usage.toolCalls).toBe(4);
  });

  it('recovers a carrier that died: its completed nodes written once, the interrupted one run again in a job of its own', async () => {
    // Width 3: one carrier for the three. s0 and s2 finish; the worker dies while s1 is held.
    const { body } = sources('y', 3, (id) => (id === 'y-s1' ? call(id, '/gate?x=1') : call(id)));
    const posted = await postRun(crashing.url, body);
    const runId = posted.body.runId as string;
    await server.hitCount('y-s1', 1);
    for (const id of ['y-s0', 'y-s2']) {
      await untilEvent(crashing.url, runId, (e) => e.data.type === 'node.succeeded' && e.data.nodeId === id, {
        what: `node.succeeded of ${id}`,
      });
    }
    await workers.at(-1)!.kill('SIGKILL');
    server.openGate('y-s1');
    await startWorker();
    const doc = await waitFor(crashing.url, runId, 60_000);
    expect(doc.status).toBe('succeeded');
    expect(server.hitsOf('y-s0')).toHaveLength(1);
    expect(server.hitsOf('y-s2')).toHaveLength(1);
    const [before, after] = server.hitsOf('y-s1');
    expect(after!.idempotencyKey).toBe(before!.idempotencyKey);
    expect(server.hitsOf('y-join')).toHaveLength(1);
    // The redelivered carrier completed s0 and s2 again (written once) and gave s1 a job.
    expect(await nodeJobsAdded(crashing, runId)).toEqual(['y-s0+', 'y-s1']);
    expect(doc.nodes['y-s0']!.attempts.map((a) => a.carriedBy)).toEqual([`${runId}.y-s0+`]);
    expect(doc.nodes['y-s1']!.attempts.map((a) => a.carriedBy ?? null)).toEqual([null]);
  });
});
