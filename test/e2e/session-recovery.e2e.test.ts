/**
 * Sessions survive process deaths: a lane held by a run whose worker is killed with SIGKILL moves
 * on once another worker recovers the run, and a transcript outlives the API and workers.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startModelServer, type ModelServer } from '../support/model-server.js';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { laneIdle, post, startStack, waitFor, type Stack } from '../support/stack.js';

let model: ModelServer;
const workers: Spawned[] = [];
const stacks: Stack[] = [];

/** Whether the first call for the message "one" came: it is never answered (its worker is killed). */
let heldOne = false;

beforeAll(async () => {
  model = await startModelServer({
    script: (r) => {
      const text = r.messages.at(-1)?.content ?? '';
      if (text === 'one' && !heldOne) {
        heldOne = true;
        return { hang: true };
      }
      return { content: `echo: ${text}` };
    },
    defaultLatencyMs: 1500,
  });
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill('SIGKILL')));
  for (const s of stacks) await s.close();
  await model?.close();
});

async function toolWorker(env: Record<string, string>): Promise<Spawned> {
  const worker = spawnTetraloop(['worker', '--pool', 'tool'], env);
  workers.push(worker);
  await stderrMatches(worker, /worker ready/);
  return worker;
}

it('moves a lane on after the worker running its run is killed, and keeps the order', async () => {
  const stack = await startStack({
    pools: ['sense', 'plan'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_LOCK_DURATION_MS: '2000',
      TETRALOOP_STALLED_INTERVAL_MS: '1000',
      TETRALOOP_LANE_SWEEP_MS: '500',
    },
  });
  stacks.push(stack);
  const first = await toolWorker(stack.env);
  const a = (await post(stack.url, '/v1/sessions/crash/messages', { text: 'one' })).body as { runId: string };
  const b = (await post(stack.url, '/v1/sessions/crash/messages', { text: 'two', mode: 'followup' }))
    .body as { runId: string; queued: boolean };
  expect(b.queued).toBe(true);
  // The first run's model call is in flight (held) on the first worker: kill it there.
  await model.received((r) => r.messages.at(-1)?.content === 'one');
  await first.kill('SIGKILL');
  await toolWorker(stack.env);
  const [docA, docB] = [await waitFor(stack.url, a.runId, 60_000), await waitFor(stack.url, b.runId, 60_000)];
  expect(docA.status).toBe('succeeded');
  expect(docB.status).toBe('succeeded');
  expect(Date.parse(docB.startedAt!)).toBeGreaterThanOrEqual(Date.parse(docA.finishedAt!));
  await laneIdle(stack, 'crash');
  const view = (await fetch(`${stack.url}/v1/sessions/crash`).then((r) => r.json())) as {
    running: string | null;
  };
  expect(view.running).toBeNull();
});

it('keeps the transcript across an API and worker restart', async () => {
  const env = { OPENAI_BASE_URL: model.url, TETRALOOP_MODEL_MAX_RETRIES: '0' };
  const first = await startStack({ pools: ['sense', 'plan', 'tool'], env });
  const placed = (await post(first.url, '/v1/sessions/durable/messages', { text: 'remember me' })).body as {
    runId: string;
  };
  await waitFor(first.url, placed.runId);
  await laneIdle(first, 'durable');
  const before = await fetch(`${first.url}/v1/sessions/durable/transcript`).then((r) => r.text());
  await first.close();
  const second = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: { ...env, TETRALOOP_PREFIX: first.prefix },
  });
  stacks.push(second);
  const after = await fetch(`${second.url}/v1/sessions/durable/transcript`).then((r) => r.text());
  expect(after).toBe(before);
  expect(after).toContain('remember me');
  expect(after).toContain('"role":"assistant"');
});
