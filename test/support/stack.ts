/** A whole Tetraloop (API + worker pools) in the test process, on the suite's Redis, under its own prefix. */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { parseApiEnv, startApi, type ApiHandle } from '@tetraloop/api';
import { Job, Queue } from 'bullmq';
import { parseSseBlock } from '@tetraloop/client';
import { isTerminal, type LiveNodeState, type RunDocument, type RunEvent } from '@tetraloop/core/domain';
import type { ExecutorHooks } from '@tetraloop/core/executor';
import type { DestinationStream } from '@tetraloop/core/logging';
import { nodeJobId, type Pool } from '@tetraloop/core/queues';
import { connectRedis } from '@tetraloop/core/runtime';
import { signWebhook } from '@tetraloop/core/webhooks';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';

export interface Stack {
  readonly url: string;
  readonly prefix: string;
  readonly env: Record<string, string>;
  readonly api: ApiHandle;
  readonly pools: PoolsHandle | undefined;
  close(): Promise<void>;
}

export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL: inject('redisUrl'),
    TETRALOOP_PREFIX: `test-${randomUUID()}`,
    LOG_LEVEL: 'silent',
    TETRALOOP_HTTP_ALLOW_HOSTS: '127.0.0.1',
    PORT: '0',
    HOST: '127.0.0.1',
    TETRALOOP_AUTH: 'off',
    // Suites run side by side on few cores: a message's placing may take longer than a second or two.
    TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS: '20000',
    ...overrides,
  };
}

export interface StackOptions {
  env?: Record<string, string>;
  pools?: Pool[];
  hooks?: ExecutorHooks;
  /** Where the API's and the pools' logs go (stdout when absent). */
  logDestination?: DestinationStream;
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const env = testEnv(options.env);
  const pools =
    options.pools?.length === 0
      ? undefined
      : await startPools(parseWorkerEnv(env), {
          pools: options.pools ?? ['plan', 'tool'],
          ...(options.hooks ? { hooks: options.hooks } : {}),
          ...(options.logDestination ? { logDestination: options.logDestination } : {}),
        });
  const api = await startApi(
    parseApiEnv(env),
    options.logDestination ? { logDestination: options.logDestination } : {},
  );
  return {
    url: api.url,
    prefix: env.TETRALOOP_PREFIX!,
    env,
    api,
    pools,
    async close() {
      await api.close();
      await pools?.close();
    },
  };
}

/** The admin token of a stack started by {@link startKeyedStack}. */
export const ROOT_TOKEN = 'root-token-keyed-stack-0123456789-0123456789';

/** Makes an API key of `tenant` with `scopes` through `POST /v1/keys` (as the admin); answers it. */
export async function makeKey(url: string, tenant: string, scopes: readonly string[]): Promise<string> {
  const res = await fetch(`${url}/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ROOT_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tenant, scopes }),
  });
  if (res.status !== 201) throw new Error(`POST /v1/keys answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { key: string }).key;
}

/**
 * A stack that requires API keys (`TETRALOOP_AUTH=required`, admin token {@link ROOT_TOKEN}), with
 * one key per tenant of `tenants`, each with `scopes`: the stack and the keys by tenant.
 */
export async function startKeyedStack(
  options: StackOptions & { tenants: readonly string[]; scopes: readonly string[] },
): Promise<{ stack: Stack; keys: Record<string, string> }> {
  const stack = await startStack({
    ...options,
    env: { ...options.env, TETRALOOP_AUTH: 'required', TETRALOOP_ADMIN_TOKEN: ROOT_TOKEN },
  });
  const keys: Record<string, string> = {};
  for (const tenant of options.tenants) keys[tenant] = await makeKey(stack.url, tenant, options.scopes);
  return { stack, keys };
}

export async function postRun(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Submits a run and waits for it to settle; fails the test if it is not accepted. */
export async function runToEnd(url: string, body: unknown): Promise<RunDocument> {
  const posted = await postRun(url, body);
  if (posted.status !== 202) throw new Error(`run not accepted: ${JSON.stringify(posted.body)}`);
  return waitFor(url, posted.body.runId as string);
}

export async function waitFor(
  url: string,
  runId: string,
  timeoutMs = 20_000,
  headers: Record<string, string> = {},
): Promise<RunDocument> {
  const res = await fetch(`${url}/v1/runs/${runId}/wait?timeoutMs=${timeoutMs}`, { headers });
  const doc = (await res.json()) as RunDocument;
  if (res.status !== 200) throw new Error(`run ${runId} did not settle: ${JSON.stringify(doc.nodes)}`);
  return doc;
}

/** One server-sent event of a run's stream: its id (the event's seq), SSE event name (family) and data. */
export interface StreamedEvent {
  id: number;
  event: string;
  data: RunEvent;
}

/** One SSE block as a run event (the client's parser); comments such as `: keep-alive` give none. */
function parseEventBlock(block: string): StreamedEvent | undefined {
  const message = parseSseBlock(block);
  if (message?.id === undefined) return undefined;
  return {
    id: Number(message.id),
    event: message.event ?? 'message',
    data: JSON.parse(message.data) as RunEvent,
  };
}

const describeEvent = (e: StreamedEvent | undefined): string =>
  e ? `#${e.id} ${e.data.type}${e.data.nodeId ? ` (${e.data.nodeId})` : ''}` : 'none';

/** An event stream as soon as its headers arrived: its status, and its events once the server ends it. */
export interface OpenStream {
  readonly status: number;
  readonly headers: Headers;
  /** Every event, once the server closed the stream (rejects when `close` cut it). */
  readonly events: Promise<StreamedEvent[]>;
  /** Cuts the stream from the client's side. */
  close(): void;
}

/**
 * Opens a run's event stream (after `lastEventId` when given) and resolves once its headers are
 * in: by then the API follows the run for it.
 */
export async function openEvents(
  url: string,
  runId: string,
  options: { lastEventId?: number; headers?: Record<string, string> } = {},
): Promise<OpenStream> {
  const gone = new AbortController();
  const res = await fetch(`${url}/v1/runs/${runId}/events`, {
    signal: gone.signal,
    headers: {
      ...(options.lastEventId === undefined ? {} : { 'last-event-id': String(options.lastEventId) }),
      ...options.headers,
    },
  });
  const events = res.text().then((text) =>
    text
      .split('\n\n')
      .map(parseEventBlock)
      .filter((e): e is StreamedEvent => e !== undefined),
  );
  // A stream cut on purpose is not an unhandled rejection; `events` still rejects for who awaits it.
  events.catch(() => undefined);
  return { status: res.status, headers: res.headers, events, close: () => gone.abort() };
}

/** Reads a run's server-sent events until the server closes the stream. */
export async function readEvents(
  url: string,
  runId: string,
  lastEventId?: number,
): Promise<{ id: number; event: string; data: RunEvent }[]> {
  const stream = await openEvents(url, runId, lastEventId === undefined ? {} : { lastEventId });
  if (stream.status !== 200) throw new Error(`events answered ${stream.status}`);
  return stream.events;
}

/**
 * Follows a run's event stream (`GET /v1/runs/:id/events`, from the start or after `lastEventId`)
 * and resolves with the first event `match` accepts, then closes the stream. Fails when the stream
 * ends without one (the run finished) or when `timeoutMs` passes first.
 */
export async function untilEvent(
  url: string,
  runId: string,
  match: (e: StreamedEvent) => boolean,
  options: { timeoutMs?: number; lastEventId?: number; what?: string } = {},
): Promise<StreamedEvent> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const what = options.what ?? 'a matching event';
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  let last: StreamedEvent | undefined;
  try {
    const res = await fetch(`${url}/v1/runs/${runId}/events`, {
      signal: controller.signal,
      headers: options.lastEventId === undefined ? {} : { 'last-event-id': String(options.lastEventId) },
    });
    if (res.status !== 200 || !res.body) throw new Error(`events of run ${runId} answered ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        throw new Error(
          `run ${runId}: its event stream ended without ${what} (last event: ${describeEvent(last)})`,
        );
      }
      buffered += value;
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const e = parseEventBlock(buffered.slice(0, end));
        buffered = buffered.slice(end + 2);
        if (!e) continue;
        last = e;
        if (match(e)) return e;
      }
    }
  } catch (err) {
    if (timedOut) {
      throw new Error(`run ${runId}: no ${what} within ${timeoutMs} ms (last event: ${describeEvent(last)})`);
    }
    throw err;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}

export async function post(
  url: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    ...(body === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Stores secret `name` for the custom `tools` only, as a suite does before its tools read it; answers the status. */
export async function putToolSecret(
  url: string,
  name: string,
  value: string,
  tools: readonly string[],
): Promise<number> {
  const res = await fetch(`${url}/v1/secrets/${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ value, tools }),
  });
  return res.status;
}

/** A JSON request to the stack as the root token `root` acting for `tenant` (`X-Tetraloop-Tenant`). */
export async function callAsTenant(
  url: string,
  root: string,
  tenant: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${root}`,
      'x-tetraloop-tenant': tenant,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/**
 * Posts `body` to a webhook source, signed with `secret` (at `t`, unix seconds, default now) in
 * `X-Tetraloop-Signature`; `signature` replaces the header (null: none).
 */
export async function postWebhook(
  url: string,
  source: string,
  body: unknown,
  secret: string,
  options: { t?: number; signature?: string | null } = {},
): Promise<{ status: number; body: Record<string, unknown>; signature: string }> {
  const raw = JSON.stringify(body);
  const signature = options.signature === undefined ? signWebhook(secret, raw, options.t) : options.signature;
  const res = await fetch(`${url}/v1/sources/${source}/events`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(signature === null ? {} : { 'x-tetraloop-signature': signature }),
    },
    body: raw,
  });
  return {
    status: res.status,
    body: (await res.json()) as Record<string, unknown>,
    signature: signature ?? '',
  };
}

/** What the helpers below need of a stack: its API, and its Redis and prefix for the job queues' events. */
export type StackRef = Pick<Stack, 'url' | 'prefix' | 'env'>;

/** One entry of a BullMQ queue's event stream (`added`, `active`, `delayed`, `completed`, `failed`, …). */
export interface JobEvent {
  readonly queue: string;
  readonly event: string;
  readonly jobId: string;
  /** The job's name, when its `added` event was seen by this follower. */
  readonly name: string | undefined;
}

export interface JobEvents {
  /**
   * The next event (after the one last returned, or after the follower was made) that `match`
   * accepts; events it passes over are dropped. Fails once `deadline` (epoch ms) passes.
   */
  next(match: (e: JobEvent) => boolean, deadline: number, what: string): Promise<JobEvent>;
  close(): void;
}

/** Whether `e` is the end of a job (its `completed` or `failed`), or of job `jobId` when given. */
export const isJobEnd = (e: JobEvent, jobId?: string): boolean =>
  (jobId === undefined || e.jobId === jobId) && (e.event === 'completed' || e.event === 'failed');

/**
 * Follows the BullMQ event streams of some of the stack's queues from this moment on (blocking
 * reads, XREAD BLOCK). Make it before looking at the state it is to report changes of: nothing
 * that happens after that look can then be missed.
 */
export async function followJobEvents(
  stack: StackRef,
  queues: readonly Pool[],
  /** The BullMQ prefix of the queues: the stack's own, or one shard's (`queueLayout`). */
  bullPrefix = stack.prefix,
): Promise<JobEvents> {
  const redis = connectRedis(stack.env.REDIS_URL!, 'worker', 'tetraloop-test-job-events');
  const keys = queues.map((q) => `${bullPrefix}:${q}:events`);
  const queueOf = new Map(keys.map((k, i) => [k, queues[i]!]));
  // Each stream is read after its newest entry now ('0-0' when it has none yet). A follower that
  // cannot start leaves no connection behind.
  const cursors = await Promise.all(
    keys.map(async (k) => (await redis.xrevrange(k, '+', '-', 'COUNT', 1))[0]?.[0] ?? '0-0'),
  ).catch((err: unknown) => {
    redis.disconnect();
    throw err;
  });
  const names = new Map<string, string>();
  const pending: JobEvent[] = [];
  return {
    async next(match, deadline, what) {
      for (;;) {
        for (let e = pending.shift(); e; e = pending.shift()) if (match(e)) return e;
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new Error(`timed out waiting for ${what}`);
        const result = await redis.xread('COUNT', 1000, 'BLOCK', remaining, 'STREAMS', ...keys, ...cursors);
        if (!result) throw new Error(`timed out waiting for ${what}`);
        for (const [key, entries] of result) {
          const index = keys.indexOf(key);
          for (const [id, list] of entries) {
            cursors[index] = id;
            const fields: Record<string, string> = {};
            for (let i = 0; i + 1 < list.length; i += 2) fields[list[i]!] = list[i + 1]!;
            const jobId = fields.jobId ?? '';
            if (fields.event === 'added' && fields.name) names.set(jobId, fields.name);
            pending.push({
              queue: queueOf.get(key)!,
              event: fields.event ?? '',
              jobId,
              name: names.get(jobId),
            });
          }
        }
      }
    },
    close() {
      redis.disconnect();
    },
  };
}

/**
 * Resolves once the run's root job has completed: its finalize pass, which settles the run and
 * then records it in memory, enqueues its webhook deliveries and announces it, is done (a waiter on
 * `/wait` may hear of the settled run before that pass has ended). Safe to call after the fact:
 * a job already completed resolves at once, while completed root jobs are kept
 * (TETRALOOP_JOB_COMPLETED_COUNT). Rejects when the root job failed for good.
 *
 * The plan queue's events are followed from before the job's state is read, so an end that comes
 * after that read is in the stream past the follower's cursor. (A `QueueEvents` made here starts
 * reading at `$` only when its first XREAD reaches Redis, after its `waitUntilReady` has resolved
 * and a CLIENT SETNAME round trip: an end between `waitUntilFinished`'s own look and that XREAD was
 * never reported, and the wait timed out with the job completed.)
 */
export async function rootJobFinished(stack: StackRef, runId: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const events = await followJobEvents(stack, ['plan']);
  const connection = connectRedis(stack.env.REDIS_URL!, 'worker', 'tetraloop-test-root-job');
  const plan = new Queue('plan', { connection, prefix: stack.prefix });
  try {
    let state: string = await plan.getJobState(runId);
    if (state === 'unknown') throw new Error(`run ${runId} has no root job`);
    if (state !== 'completed' && state !== 'failed') {
      const end = await events.next(
        (e) => isJobEnd(e, runId),
        deadline,
        `the root job of run ${runId} to finish`,
      );
      state = end.event;
    }
    if (state === 'failed') {
      const job = await Job.fromId(plan, runId);
      throw new Error(`the root job of run ${runId} failed: ${job?.failedReason ?? 'no reason kept'}`);
    }
  } finally {
    events.close();
    await plan.close();
    connection.disconnect();
  }
}

/** Runs `body` to its end and answers its document once its root job has completed (see above). */
export async function runToFinalized(
  stack: StackRef,
  body: unknown,
  timeoutMs = 20_000,
): Promise<RunDocument> {
  const doc = await runToEnd(stack.url, body);
  await rootJobFinished(stack, doc.runId, timeoutMs);
  return doc;
}

/**
 * Runs `act` (runs that should make the reflect pool reflect on `agentId`), and resolves with what
 * it answered once that agent's reflection job has completed.
 */
export async function withReflection<T>(
  stack: StackRef,
  agentId: string,
  act: () => Promise<T>,
  timeoutMs = 20_000,
): Promise<T> {
  const jobs = await followJobEvents(stack, ['reflect']);
  try {
    const result = await act();
    await jobs.next(
      (e) => e.jobId === `reflect-${agentId}` && e.event === 'completed',
      Date.now() + timeoutMs,
      `the reflection of ${agentId}`,
    );
    return result;
  } finally {
    jobs.close();
  }
}

async function runDocument(url: string, runId: string): Promise<RunDocument> {
  const res = await fetch(`${url}/v1/runs/${runId}`);
  if (res.status !== 200) throw new Error(`run ${runId} answered ${res.status}`);
  return (await res.json()) as RunDocument;
}

/** The run event written together with each live node state, where there is one. */
const LIVE_STATE_EVENTS: Partial<Record<LiveNodeState['status'], string>> = {
  queued: 'node.queued',
  running: 'node.started',
  retrying: 'node.retrying',
};

/**
 * Resolves once node `nodeId` of the run has reached the live `status`. `queued`, `running` and
 * `retrying` are written together with an event of the run (node.queued, node.started,
 * node.retrying): that event is awaited. `waiting` is written without one (wait-state-6.lua), just
 * before the node's job parks in BullMQ's delayed set, so the run is looked at again on each event
 * of the node's job (its `delayed` one among them) until the node shows `waiting`.
 */
export async function untilNodeStatus(
  stack: StackRef,
  runId: string,
  nodeId: string,
  status: LiveNodeState['status'],
  timeoutMs = 20_000,
): Promise<void> {
  const what = `node ${nodeId} of run ${runId} to be ${status}`;
  const event = LIVE_STATE_EVENTS[status];
  if (event) {
    await untilEvent(stack.url, runId, (e) => e.data.type === event && e.data.nodeId === nodeId, {
      timeoutMs,
      what: `${event} of ${nodeId}`,
    });
    return;
  }
  const deadline = Date.now() + timeoutMs;
  const jobs = await followJobEvents(stack, ['tool']);
  const jobId = nodeJobId(runId, nodeId);
  try {
    for (;;) {
      const doc = await runDocument(stack.url, runId);
      const node = doc.nodes[nodeId] as { status?: string } | undefined;
      if (node?.status === status) return;
      if (isTerminal(doc.status)) throw new Error(`run ${runId} is ${doc.status}, waiting for ${what}`);
      await jobs.next((e) => e.jobId === jobId || e.jobId.startsWith(`${jobId}@`), deadline, what);
    }
  } finally {
    jobs.close();
  }
}

/**
 * A job whose end may have moved a session's lane: a run's root job (plan queue), in which a
 * settled session run writes its reply and moves its lane on, perhaps turning collected messages
 * into a run; a lane-advance job of the session (sense queue), which does that once their
 * debounce has passed; or the lane sweep (sense queue), which moves lanes whose mover died.
 */
const movesLane =
  (sessionKey: string) =>
  (e: JobEvent): boolean => {
    if (e.event !== 'completed' && e.event !== 'failed') return false;
    if (e.queue === 'plan') return !e.jobId.startsWith('repeat:') && !e.jobId.includes('.deadline');
    return (
      e.jobId.startsWith(`lane-${sessionKey}-`.replaceAll(':', '_')) ||
      e.jobId.startsWith('repeat:lane-sweep:')
    );
  };

/**
 * Resolves once a session's lane holds no run and nothing waits in it (its replies are written by
 * then: a settled run's own job writes its reply before it moves the lane on; only the lane sweep,
 * moving the lane of a run it finds settled, does not wait for a reply another job is writing). A
 * run holding the lane is waited for with `/wait`; a lane moves on with no run event, so otherwise
 * the lane is looked at again each time a job that may have moved it ends (see `movesLane`).
 * Fails after `timeoutMs`.
 */
export async function laneIdle(
  stack: StackRef,
  sessionKey: string,
  timeoutMs = 20_000,
  /** Sent with every request (a bearer key, with auth on). */
  headers: Record<string, string> = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const jobs = await followJobEvents(stack, ['plan', 'sense']);
  const settled = new Set<string>();
  try {
    for (;;) {
      const view = (await fetch(`${stack.url}/v1/sessions/${sessionKey}`, { headers }).then((r) =>
        r.json(),
      )) as {
        running: string | null;
        queued: unknown[];
      };
      if (!view.running && view.queued.length === 0) return;
      const run = view.running && view.running !== 'collect' ? view.running : null;
      if (run && !settled.has(run)) {
        await waitFor(stack.url, run, Math.max(1, deadline - Date.now()), headers);
        settled.add(run);
        continue;
      }
      await jobs.next(
        movesLane(sessionKey),
        deadline,
        `session ${sessionKey}'s lane to move on (running: ${view.running}, queued: ${JSON.stringify(view.queued)})`,
      );
    }
  } finally {
    jobs.close();
  }
}
