/**
 * A session message is taken in once, however often it is handled: a sense job redelivered after
 * its worker died, a client's retry with the same Idempotency-Key, a handling that died half way.
 * Found by `npm run chaos`: a message was marked seen before it was admitted, so a handling that
 * died in between left a message that every retry answered `duplicate` and no run ever answered;
 * and a run's reply was claimed before it was written, so a writer that died in between lost it.
 */
import { randomUUID } from 'node:crypto';
import { Queue, QueueEvents } from 'bullmq';
import { derivedRunId } from '@tetraloop/core/domain';
import { QUEUE_NAMES } from '@tetraloop/core/queues';
import { RunRequest } from '@tetraloop/core/runs';
import { type RedisClient, connectRedis } from '@tetraloop/core/runtime';
import { SENSE_JOB, type MessageResult, type SensePayload } from '@tetraloop/core/sessions';
import { SessionStore, busySessionsKey, runKeys, sessionKeys } from '@tetraloop/core/state';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startModelServer, type ModelServer } from './support/model-server.js';
import { laneIdle, post, startStack, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
let redis: RedisClient;
let sense: Queue;
let senseEvents: QueueEvents;
let sessions: SessionStore;

beforeAll(async () => {
  model = await startModelServer({
    script: (r) => ({
      content: `echo: ${[...r.messages].reverse().find((m) => m.role === 'user')?.content}`,
    }),
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: { OPENAI_BASE_URL: model.url, TETRALOOP_MODEL_MAX_RETRIES: '0', TETRALOOP_LANE_SWEEP_MS: '500' },
  });
  redis = connectRedis(stack.env.REDIS_URL!, 'worker', 'sessions-once-test');
  sense = new Queue(QUEUE_NAMES.sense, { connection: redis, prefix: stack.prefix });
  senseEvents = new QueueEvents(QUEUE_NAMES.sense, {
    connection: connectRedis(stack.env.REDIS_URL!, 'worker', 'sessions-once-events'),
    prefix: stack.prefix,
  });
  await senseEvents.waitUntilReady();
  sessions = new SessionStore(redis, stack.prefix);
});
afterAll(async () => {
  await senseEvents?.close();
  await sense?.close();
  redis?.disconnect();
  await stack?.close();
  await model?.close();
});

/** Hands the sense pool a message job, as the API does, and waits for what it answered. */
async function deliver(payload: SensePayload<typeof SENSE_JOB.message>): Promise<MessageResult> {
  const job = await sense.add(SENSE_JOB.message, payload);
  return (await job.waitUntilFinished(senseEvents, 20_000)) as MessageResult;
}

const userLines = async (sessionKey: string): Promise<string[]> =>
  (await fetch(`${stack.url}/v1/sessions/${sessionKey}/transcript`).then((r) => r.text()))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; role?: string; text?: string })
    .filter((l) => l.type === 'message' && l.role === 'user')
    .map((l) => l.text!);

it('answers a delivery handled twice (a redelivered job) with its one run and one transcript line', async () => {
  const sessionKey = `twice-${randomUUID()}`;
  const payload = {
    sessionKey,
    message: { text: 'only once', mode: 'followup' as const },
    deliveryId: randomUUID(),
  };
  const first = await deliver(payload);
  expect(first).toMatchObject({ queued: false, runId: expect.any(String) });
  const again = await deliver(payload);
  expect(again).toMatchObject({ duplicate: true, runId: first.runId });
  expect((await waitFor(stack.url, first.runId!)).status).toBe('succeeded');
  await laneIdle(stack, sessionKey);
  expect(await userLines(sessionKey)).toEqual(['only once']);
});

/**
 * What a first handling of a message left in session `<name>-<uuid>`: the run of `node` stored and
 * not started, the message admitted to the idle lane. `redeliver` hands the same delivery in again.
 */
async function leftBehind(name: string, node: Record<string, unknown>) {
  const sessionKey = `${name}-${randomUUID()}`;
  const deliveryId = randomUUID();
  const runId = derivedRunId('session-message', sessionKey, deliveryId);
  await stack.api.runs.submit(RunRequest.parse({ graph: { nodes: [node] } }), undefined, {
    sessionKey,
    start: false,
    runId,
  });
  const admitted = await sessions.admit(sessionKey, {
    mode: 'followup',
    runId,
    message: { text: 'left behind', receivedAt: new Date().toISOString() },
    collectCap: 20,
    drop: 'summarize',
    envCap: 100,
    followupCap: 100,
    once: { id: `delivery:${deliveryId}`, windowMs: 600_000 },
    line: { type: 'message', role: 'user', text: 'left behind' },
  });
  const redeliver = () =>
    deliver({ sessionKey, message: { text: 'left behind', mode: 'followup' }, deliveryId });
  return { sessionKey, runId, admitted, redeliver };
}

it('starts the run of a message admitted by a handling that died before starting it', async () => {
  // What the first handling left: the run stored, the message admitted to the idle lane, no start.
  const { sessionKey, runId, admitted, redeliver } = await leftBehind('unstarted', {
    id: 'a',
    kind: 'tool',
    tool: 'json',
    args: { value: 1 },
  });
  expect(admitted).toEqual({ kind: 'start', runId });
  const again = await redeliver();
  expect(again).toMatchObject({ duplicate: true, runId });
  expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
  await laneIdle(stack, sessionKey);
  expect(await userLines(sessionKey)).toEqual(['left behind']);
});

it('puts back among the busy lanes the lane of a message whose handling died before noting it busy', async () => {
  // The run waits a while, so the lane is still running it when the busy set is read.
  const { sessionKey, runId, redeliver } = await leftBehind('unnoted', {
    id: 'w',
    kind: 'wait',
    forMs: 1500,
  });
  // The handling died between the lane script and noting the lane busy: the sweep cannot see it.
  await redis.srem(busySessionsKey(stack.prefix), sessionKey);
  const again = await redeliver();
  expect(again).toMatchObject({ duplicate: true, runId });
  expect(await redis.sismember(busySessionsKey(stack.prefix), sessionKey)).toBe(1);
  expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
  await laneIdle(stack, sessionKey);
  expect(await userLines(sessionKey)).toEqual(['left behind']);
});

it('admits the retry of a message whose first handling died before admitting it, and drops that handling’s run', async () => {
  const sessionKey = `retried-${randomUUID()}`;
  const first = randomUUID();
  const orphan = derivedRunId('session-message', sessionKey, first);
  // The first handling stored its run and died: nothing admitted, nothing in the transcript.
  await stack.api.runs.submit(
    RunRequest.parse({ graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } }),
    undefined,
    { sessionKey, start: false, runId: orphan },
  );
  // The client's retry, with the same key: a new delivery, taken in and answered.
  const retry = await post(stack.url, `/v1/sessions/${sessionKey}/messages`, {
    text: 'say it again',
    mode: 'followup',
    eventId: 'key-1',
  });
  expect(retry.status).toBe(202);
  const runId = retry.body.runId as string;
  expect(runId).not.toBe(orphan);
  expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
  // The first delivery, redelivered: the message is in; the run it had prepared is dropped.
  const redelivered = await deliver({
    sessionKey,
    message: { text: 'say it again', mode: 'followup', eventId: 'key-1' },
    deliveryId: first,
  });
  expect(redelivered).toEqual({ sessionKey, queued: false, duplicate: true });
  expect((await fetch(`${stack.url}/v1/runs/${orphan}`)).status).toBe(404);
  await laneIdle(stack, sessionKey);
  expect(await userLines(sessionKey)).toEqual(['say it again']);
});

it('takes the Idempotency-Key header as the message’s id, and refuses one that differs from its eventId', async () => {
  const sessionKey = `keyed-${randomUUID()}`;
  const send = (headers: Record<string, string>, body: object) =>
    fetch(`${stack.url}/v1/sessions/${sessionKey}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const first = await send({ 'idempotency-key': 'k-1' }, { text: 'hello', mode: 'followup' });
  expect(first.status).toBe(202);
  const placed = (await first.json()) as MessageResult;
  const again = await send({ 'idempotency-key': 'k-1' }, { text: 'hello', mode: 'followup' });
  expect(again.status).toBe(202);
  expect(await again.json()).toMatchObject({ duplicate: true });
  // The key and the eventId name the same thing.
  const asEventId = await send({}, { text: 'hello', mode: 'followup', eventId: 'k-1' });
  expect(await asEventId.json()).toMatchObject({ duplicate: true });
  const conflicting = await send({ 'idempotency-key': 'k-2' }, { text: 'hello', eventId: 'k-3' });
  expect(conflicting.status).toBe(400);
  expect(await conflicting.json()).toMatchObject({
    error: { code: 'invalid_request', issues: [{ path: 'headers.idempotency-key' }] },
  });
  expect((await waitFor(stack.url, placed.runId!)).status).toBe('succeeded');
  await laneIdle(stack, sessionKey);
  expect(await userLines(sessionKey)).toEqual(['hello']);
});

it('writes a run’s reply once when its writer comes again (it died after writing, before marking the run)', async () => {
  const sessionKey = `reply-${randomUUID()}`;
  const placed = await post(stack.url, `/v1/sessions/${sessionKey}/messages`, { text: 'reply once' });
  const runId = placed.body.runId as string;
  expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
  await laneIdle(stack, sessionKey);
  const replies = async (): Promise<number> =>
    (await fetch(`${stack.url}/v1/sessions/${sessionKey}/transcript`).then((r) => r.text()))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; role?: string; runId?: string })
      .filter((l) => l.runId === runId && (l.type === 'run' || l.role === 'assistant')).length;
  expect(await replies()).toBe(2);
  // As a writer that died after the transcript lines, before it marked the run replied, leaves it;
  // and the lane still on the run, so the sweep moves it on and writes the reply again.
  await redis.hdel(runKeys(stack.prefix, runId).meta, 'sessionReplied');
  await redis.hset(sessionKeys(stack.prefix, sessionKey).meta, 'running', runId);
  await redis.sadd(busySessionsKey(stack.prefix), sessionKey);
  await laneIdle(stack, sessionKey);
  expect(await replies()).toBe(2);
  expect(await redis.hget(runKeys(stack.prefix, runId).meta, 'sessionReplied')).toBe('1');
});

it('leaves a reply another pass is writing to that pass (its hooks run once), and writes it when that pass dies', async () => {
  const sessionKey = `lease-${randomUUID()}`;
  const placed = await post(stack.url, `/v1/sessions/${sessionKey}/messages`, { text: 'one writer' });
  const runId = placed.body.runId as string;
  expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
  await laneIdle(stack, sessionKey);
  const k = sessionKeys(stack.prefix, sessionKey);
  // Another pass holds the lease and has not written yet: the run unmarked, the lane still on it.
  await redis.set(k.replying, runId, 'PX', 60_000);
  await redis.hdel(runKeys(stack.prefix, runId).meta, 'sessionReplied');
  await redis.hset(k.meta, 'running', runId);
  await redis.sadd(busySessionsKey(stack.prefix), sessionKey);
  // Two whole sweeps later (the first may have begun before), the lane is still the holder's.
  let sweeps = 0;
  await new Promise<void>((resolve) => {
    const onCompleted = ({ jobId }: { jobId: string }): void => {
      if (!jobId.startsWith('repeat:lane-sweep')) return;
      if (++sweeps < 2) return;
      senseEvents.off('completed', onCompleted);
      resolve();
    };
    senseEvents.on('completed', onCompleted);
  });
  expect(await redis.hget(k.meta, 'running')).toBe(runId);
  expect(await redis.hget(runKeys(stack.prefix, runId).meta, 'sessionReplied')).toBeNull();
  // The holder died: its lease expires, and the next sweep marks the run and moves the lane on.
  await redis.del(k.replying);
  await laneIdle(stack, sessionKey);
  expect(await redis.hget(runKeys(stack.prefix, runId).meta, 'sessionReplied')).toBe('1');
  expect(await redis.exists(k.replying)).toBe(0);
});
