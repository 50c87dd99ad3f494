/**
 * A wait node that sleeps (`forMs`) holds no worker: its plan and tool worker processes are killed
 * while it sleeps and new ones started, and the run still wakes at the wake time the first worker
 * kept, exactly once — one attempt of the node, one `node.woke` event — and finishes.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { postRun, readEvents, startStack, untilEvent, waitFor, type Stack } from '../support/stack.js';

let stack: Stack;
const workers: Spawned[] = [];

beforeAll(async () => {
  // The API only: every worker is a process of its own. Short locks, so a job a killed worker held
  // (had it not parked yet) is handed back within seconds.
  stack = await startStack({
    pools: [],
    env: { TETRALOOP_LOCK_DURATION_MS: '2000', TETRALOOP_STALLED_INTERVAL_MS: '1000' },
  });
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill('SIGKILL')));
  await stack?.close();
});

async function startWorkers(): Promise<Spawned[]> {
  const started = (['plan', 'tool'] as const).map((pool) =>
    spawnTetraloop(['worker', '--pool', pool], stack.env),
  );
  workers.push(...started);
  await Promise.all(started.map((w) => stderrMatches(w, /worker ready/)));
  return started;
}

it('sleeps 2 s across a restart of every worker and wakes once', async () => {
  const first = await startWorkers();
  const posted = await postRun(stack.url, {
    graph: {
      nodes: [
        { id: 'nap', kind: 'wait', forMs: 2000 },
        { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'nap.output' } } },
      ],
      edges: [['nap', 'after']],
    },
  });
  expect(posted.status).toBe(202);
  const runId = posted.body.runId as string;
  const sleeping = await untilEvent(stack.url, runId, (e) => e.data.type === 'node.sleeping', {
    what: 'node.sleeping',
  });
  const until = (sleeping.data.data as { until: string }).until;

  await Promise.all(first.map((w) => w.kill('SIGKILL')));
  await startWorkers();
  const restartedAt = Date.now();

  const doc = await waitFor(stack.url, runId, 60_000);
  expect(doc.status).toBe('succeeded');
  const nap = doc.nodes.nap!;
  expect(nap.attempts).toHaveLength(1);
  expect(nap).toMatchObject({ status: 'succeeded', output: { until } });
  expect(doc.output).toEqual({ after: { until } });

  const events = (await readEvents(stack.url, runId)).map((e) => e.data);
  const of = (type: string) => events.filter((e) => e.type === type && e.nodeId === 'nap');
  // It woke at the wake time the first worker kept: 2 s after the node started (the wake time is
  // fixed between its start and its `node.sleeping` event), not 2 s after the restart.
  expect(Date.parse(until) - of('node.started')[0]!.ts).toBeGreaterThanOrEqual(2000);
  expect(Date.parse(until)).toBeLessThanOrEqual(sleeping.data.ts + 2000);
  expect(Date.parse(until)).toBeLessThan(restartedAt + 2000);
  expect(of('node.sleeping')).toHaveLength(1);
  expect(of('node.woke')).toHaveLength(1);
  expect(of('node.woke')[0]!.ts).toBeGreaterThanOrEqual(Date.parse(until));
  expect(of('node.started')).toHaveLength(1);
  expect(of('node.succeeded')).toHaveLength(1);
});
