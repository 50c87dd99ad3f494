/**
 * A tool worker killed with SIGKILL mid-run: a second worker process finishes the run. Completed
 * nodes (and a map's completed items) are not called again; the interrupted one is, with the same
 * Idempotency-Key.
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { postRun, startStack, waitFor, type Stack } from '../support/stack.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

let stack: Stack;
let server: ToolServer;
const workers: Spawned[] = [];

beforeAll(async () => {
  server = await startToolServer();
  // Short locks so the killed worker's job is found stalled within seconds.
  stack = await startStack({
    pools: ['plan'],
    env: { TETRALOOP_LOCK_DURATION_MS: '2000', TETRALOOP_STALLED_INTERVAL_MS: '1000' },
  });
});
// Each test starts from no worker: one left from an earlier test could take the jobs of the worker
// a test kills, and its call would finish there.
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill('SIGKILL')));
});
afterAll(async () => {
  await stack?.close();
  await server?.close();
});

async function startWorker(): Promise<Spawned> {
  const worker = spawnTetraloop(['worker', '--pool', 'tool'], stack.env);
  workers.push(worker);
  await stderrMatches(worker, /worker ready/);
  return worker;
}

it('finishes a 10-node run on a second worker after the first is killed mid-node', async () => {
  const first = await startWorker();
  const ids = Array.from({ length: 10 }, (_, i) => `n${i}`);
  const posted = await postRun(stack.url, {
    graph: {
      nodes: ids.map((id) => ({
        id,
        kind: 'tool',
        tool: 'http',
        args: { url: `${server.url}/work?node=${id}&ms=${id === 'n4' ? 3000 : 100}` },
      })),
      edges: ids.slice(1).map((id, i) => [ids[i], id]),
    },
  });
  const runId = posted.body.runId as string;

  await server.hitCount('n4', 1);
  await first.kill('SIGKILL');
  await startWorker();

  const doc = await waitFor(stack.url, runId, 60_000);
  expect(doc.status).toBe('succeeded');
  for (const id of ids) {
    expect(server.hitsOf(id), id).toHaveLength(id === 'n4' ? 2 : 1);
  }
  const [before, after] = server.hitsOf('n4');
  expect(before!.idempotencyKey).toMatch(/^[0-9a-f]{64}$/);
  expect(after!.idempotencyKey).toBe(before!.idempotencyKey);
  // The completed nodes' snapshots came from the first worker and were kept.
  const pidOf = (id: string): string | undefined => doc.nodes[id]!.attempts.at(-1)?.worker.split('/')[1];
  expect(pidOf('n0')).toBe(String(first.child.pid));
  expect(pidOf('n9')).not.toBe(String(first.child.pid));
});

it('finishes a map on a second worker after the first is killed mid-item: finished items do not run again', async () => {
  const first = await startWorker();
  // One item at a time, so which items finished before the kill is known: m0 and m1.
  const items = Array.from({ length: 6 }, (_, i) => ({ node: `m${i}`, ms: i === 2 ? 3000 : 100 }));
  const posted = await postRun(stack.url, {
    input: { items },
    graph: {
      nodes: [
        {
          id: 'read',
          kind: 'map',
          over: { $ref: 'input.items' },
          concurrency: 1,
          node: {
            kind: 'tool',
            tool: 'http',
            args: { url: `${server.url}/work?node={{item.node}}&ms={{item.ms}}` },
          },
        },
      ],
    },
  });
  const runId = posted.body.runId as string;

  await server.hitCount('m2', 1);
  await first.kill('SIGKILL');
  await startWorker();

  const doc = await waitFor(stack.url, runId, 60_000);
  expect(doc.status).toBe('succeeded');
  expect((doc.output as { read: { body: { node: string } }[] }).read.map((o) => o.body.node)).toEqual(
    items.map((i) => i.node),
  );
  for (const { node } of items) expect(server.hitsOf(node), node).toHaveLength(node === 'm2' ? 2 : 1);
  const [before, after] = server.hitsOf('m2');
  expect(after!.idempotencyKey).toBe(before!.idempotencyKey);
});
