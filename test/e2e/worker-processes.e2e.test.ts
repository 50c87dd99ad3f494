/** Pools scale as separate processes: two `tetraloop worker --pool tool` processes share one run's nodes. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { runToEnd, startStack, type Stack } from '../support/stack.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

let stack: Stack;
let server: ToolServer;
const workers: Spawned[] = [];

beforeAll(async () => {
  server = await startToolServer();
  // The API and the plan pool in this process; the tool pool only in the two child processes. A
  // new run's first nodes start two to a carrier job: eight are four jobs, more than one process's
  // two slots hold.
  stack = await startStack({ pools: ['plan'], env: { TETRALOOP_NODE_HANDOFF_WIDTH: '2' } });
  for (let i = 0; i < 2; i++) {
    const worker = spawnTetraloop(['worker', '--pool', 'tool', '--concurrency', '2'], stack.env);
    workers.push(worker);
  }
  await Promise.all(workers.map((w) => stderrMatches(w, /worker ready/)));
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await stack?.close();
  await server?.close();
});

it('spreads the nodes of one run over both worker processes', async () => {
  const nodes = Array.from({ length: 8 }, (_, i) => ({
    id: `n${i}`,
    kind: 'tool',
    tool: 'http',
    args: { url: `${server.url}/work?node=n${i}&ms=300` },
  }));
  const doc = await runToEnd(stack.url, { graph: { nodes, edges: [] } });
  expect(doc.status).toBe('succeeded');
  const byWorker = new Set(Object.values(doc.nodes).map((n) => n.attempts.at(-1)?.worker));
  const pids = workers.map((w) => w.child.pid);
  expect(byWorker.size).toBe(2);
  for (const w of byWorker) expect(pids).toContain(Number(w?.split('/')[1]));
  for (let i = 0; i < 8; i++) expect(server.hitsOf(`n${i}`)).toHaveLength(1);
});

it('stops cleanly on SIGTERM', async () => {
  const worker = workers.pop()!;
  await worker.kill('SIGTERM');
  expect(await worker.exited).toEqual({ code: 0, signal: null });
});
