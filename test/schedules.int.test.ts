/**
 * Schedules on real BullMQ job schedulers: a one-second schedule served by two sense worker
 * processes makes one run per firing; a firing handled twice makes one run; `overlap: skip` starts
 * nothing while a slow run is active; pause and resume; `trigger` runs now; tenant isolation is
 * the auth matrix's (test/auth.int.test.ts).
 */
import { Queue, QueueEvents } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '@tetraloop/core/queues';
import { connectRedis, type RedisClient } from '@tetraloop/core/runtime';
import { SCHEDULE_FIRE_JOB } from '@tetraloop/core/schedules';
import { spawnTetraloop, stderrMatches, type Spawned } from './support/processes.js';
import { post, startStack, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let redis: RedisClient;
let sense: Queue;
let senseEvents: QueueEvents;
const workers: Spawned[] = [];

const jsonGraph = { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } };

beforeAll(async () => {
  // The API and the plan and tool pools here; the sense pool (which fires schedules) in two processes.
  stack = await startStack({ pools: ['plan', 'tool'] });
  for (let i = 0; i < 2; i++) {
    const worker = spawnTetraloop(['worker', '--pool', 'sense'], stack.env);
    workers.push(worker);
    await stderrMatches(worker, /worker ready: pools sense/);
  }
  redis = connectRedis(stack.env.REDIS_URL!, 'worker', 'schedules-test');
  sense = new Queue(QUEUE_NAMES.sense, { connection: redis, prefix: stack.prefix });
  senseEvents = new QueueEvents(QUEUE_NAMES.sense, {
    connection: connectRedis(stack.env.REDIS_URL!, 'worker', 'schedules-events'),
    prefix: stack.prefix,
  });
  await senseEvents.waitUntilReady();
}, 60_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await senseEvents?.close();
  await sense?.close();
  redis?.disconnect();
  await stack?.close();
});

/** What the routes answer, as far as these tests read it. */
interface Answer {
  runs: { runId: string; scheduleId: string; status: string }[];
  error: { issues: { path: string; message: string }[] };
}

interface ScheduleView {
  id: string;
  paused: boolean;
  nextFireAt: string | null;
  state: { lastRunId: string | null; firings: Record<string, number> };
}

const api = async (
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Answer }> => {
  const res = await fetch(`${stack.url}${path}`, {
    method: method.toUpperCase(),
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Answer };
};

const runsOf = async (scheduleId: string): Promise<{ runId: string; scheduleId: string; status: string }[]> =>
  (await api('get', `/v1/runs?scheduleId=${scheduleId}&limit=200`)).body.runs;

/** Resolves with the firings (job ids) of a schedule once `count` of them completed. */
function firings(scheduleId: string, count: number): Promise<string[]> {
  const seen = new Set<string>();
  return new Promise((resolve) => {
    const onCompleted = ({ jobId }: { jobId: string }): void => {
      if (!jobId.includes(`:${scheduleId}:`)) return;
      seen.add(jobId);
      if (seen.size < count) return;
      senseEvents.off('completed', onCompleted);
      resolve([...seen]);
    };
    senseEvents.on('completed', onCompleted);
  });
}

describe('a schedule', () => {
  it('fires every second on two worker processes and makes exactly one run per firing', async () => {
    const made = await api('post', '/v1/schedules', {
      name: 'every second',
      everyMs: 1000,
      overlap: 'allow',
      request: { ...jsonGraph, tags: ['scheduled'] },
    });
    expect(made.status).toBe(201);
    const id = (made.body as unknown as ScheduleView).id;
    expect(made.body).toMatchObject({ everyMs: 1000, cron: null, overlap: 'allow', paused: false });
    const fired = await firings(id, 4);
    // Paused: its job scheduler is gone, so nothing fires after the firings still being handled.
    expect((await api('patch', `/v1/schedules/${id}`, { paused: true })).body).toMatchObject({
      paused: true,
      nextFireAt: null,
    });
    expect(await sense.getJobScheduler(`schedule:default:${id}`)).toBeUndefined();
    const view = (await api('get', `/v1/schedules/${id}`)).body as unknown as ScheduleView;
    const started = view.state.firings.started!;
    expect(started).toBeGreaterThanOrEqual(fired.length);
    const runs = await runsOf(id);
    // One run per firing: as many runs as firings that started one, none twice.
    expect(runs).toHaveLength(started);
    expect(new Set(runs.map((r) => r.runId)).size).toBe(started);
    for (const run of runs) expect((await waitFor(stack.url, run.runId)).status).toBe('succeeded');
    const doc = await waitFor(stack.url, runs[0]!.runId);
    expect(doc).toMatchObject({ scheduleId: id, tags: ['scheduled'] });
    // Each firing's due time is a distinct second.
    const dueTimes = fired.map((jobId) => Number(jobId.slice(jobId.lastIndexOf(':') + 1)));
    expect(new Set(dueTimes.map((t) => Math.round(t / 1000))).size).toBe(fired.length);
  }, 60_000);

  it('makes one run of a firing handled twice (its job handed out again)', async () => {
    const made = await api('post', '/v1/schedules', {
      name: 'daily',
      cron: '0 3 * * *',
      timezone: 'Europe/Paris',
      request: jsonGraph,
    });
    const id = (made.body as unknown as ScheduleView).id;
    const dueAt = Date.parse((made.body as unknown as ScheduleView).nextFireAt!) - 86_400_000;
    // As a firing handed out twice: two jobs of the same due time, one after the other.
    let delivery = 0;
    const handle = async (): Promise<{ outcome: string; runId?: string }> => {
      const job = await sense.add(
        SCHEDULE_FIRE_JOB,
        { tenant: 'default', scheduleId: id },
        { jobId: `firing-${id}-${++delivery}`, timestamp: dueAt, removeOnComplete: true },
      );
      return (await job.waitUntilFinished(senseEvents, 20_000)) as { outcome: string; runId?: string };
    };
    const first = await handle();
    expect(first).toMatchObject({ outcome: 'started', runId: expect.any(String) });
    await waitFor(stack.url, first.runId!);
    // The first run is done, so overlap does not stand in the way: the same firing finds its run.
    const again = await handle();
    expect(again).toEqual(first);
    expect(await runsOf(id)).toHaveLength(1);
    await api('delete', `/v1/schedules/${id}`);
  });

  it('skips a firing while its slow run is active (overlap: skip), and starts again once it ended', async () => {
    const made = await api('post', '/v1/schedules', {
      name: 'slow',
      everyMs: 1000,
      request: {
        graph: { nodes: [{ id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 60, acceptEarly: true }] },
      },
    });
    const id = (made.body as unknown as ScheduleView).id;
    // The run holds (waits for a signal) while two more firings come.
    await firings(id, 3);
    const held = (await api('get', `/v1/schedules/${id}`)).body as unknown as ScheduleView;
    expect(held.state.firings.started).toBe(1);
    expect(held.state.firings.skipped_overlap).toBeGreaterThanOrEqual(2);
    expect(await runsOf(id)).toHaveLength(1);
    await post(stack.url, `/v1/runs/${held.state.lastRunId}/signals/go`, {});
    expect((await waitFor(stack.url, held.state.lastRunId!)).status).toBe('succeeded');
    // The run ended: a later firing starts the next.
    for (;;) {
      await firings(id, 1);
      const after = (await api('get', `/v1/schedules/${id}`)).body as unknown as ScheduleView;
      if (after.state.firings.started! >= 2) break;
    }
    await api('delete', `/v1/schedules/${id}`);
    expect(await sense.getJobScheduler(`schedule:default:${id}`)).toBeUndefined();
  }, 60_000);

  it('runs now on trigger, whatever its pause; resumes firing when unpaused', async () => {
    const made = await api('post', '/v1/schedules', {
      name: 'on demand',
      cron: '0 3 1 1 *',
      paused: true,
      request: jsonGraph,
    });
    const id = (made.body as unknown as ScheduleView).id;
    expect(made.body).toMatchObject({ paused: true, nextFireAt: null });
    expect(await sense.getJobScheduler(`schedule:default:${id}`)).toBeUndefined();
    const res = await fetch(`${stack.url}/v1/schedules/${id}/trigger`, {
      method: 'POST',
      headers: { 'idempotency-key': 'now-1' },
    });
    expect(res.status).toBe(202);
    const { runId } = (await res.json()) as { runId: string };
    const again = await fetch(`${stack.url}/v1/schedules/${id}/trigger`, {
      method: 'POST',
      headers: { 'idempotency-key': 'now-1' },
    });
    expect(((await again.json()) as { runId: string }).runId).toBe(runId);
    expect(await waitFor(stack.url, runId)).toMatchObject({ status: 'succeeded', scheduleId: id });
    expect(((await api('get', `/v1/schedules/${id}`)).body as unknown as ScheduleView).state.lastRunId).toBe(
      runId,
    );
    const resumed = (await api('patch', `/v1/schedules/${id}`, { paused: false }))
      .body as unknown as ScheduleView;
    expect(resumed.nextFireAt).toMatch(/-01-01T03:00:00.000Z$/);
    expect(await sense.getJobScheduler(`schedule:default:${id}`)).toMatchObject({
      pattern: '0 3 1 1 *',
      tz: 'UTC',
    });
    await api('delete', `/v1/schedules/${id}`);
  });

  it('refuses a bad schedule with the exact field, and a run request the ceilings refuse', async () => {
    const noCadence = await api('post', '/v1/schedules', { name: 'x', request: jsonGraph });
    expect(noCadence.status).toBe(400);
    expect(noCadence.body.error.issues).toEqual([{ path: 'cron', message: 'give cron or everyMs' }]);
    const badGraph = await api('post', '/v1/schedules', {
      name: 'x',
      everyMs: 60_000,
      request: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope', args: {} }] } },
    });
    expect(badGraph.status).toBe(400);
    expect(badGraph.body.error.issues[0]?.path).toMatch(/^request\.graph\.nodes\.0/);
    const badRequest = await api('post', '/v1/schedules', {
      name: 'x',
      everyMs: 60_000,
      request: { task: '' },
    });
    expect(badRequest.body.error.issues[0]?.path).toBe('request.task');
    expect((await api('get', '/v1/schedules/sch_nope')).status).toBe(404);
    expect((await api('patch', '/v1/schedules/sch_nope', { paused: true })).status).toBe(404);
  });
});
