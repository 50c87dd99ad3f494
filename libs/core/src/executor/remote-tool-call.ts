/**
 * A custom tool called by an agent or a loop in a process without the tool's code. The call goes
 * to the tool's queue (of the run's shard) as a `call` job; a worker serving that queue runs it as
 * it runs a tool node's call (`runToolCall`: secrets, ctx, time limit, error classes, output schema)
 * and answers the outcome as the job's return value, a tool failure included (the job itself never
 * fails for one): the calling agent's harness decides about retries as for a call made in process.
 * The caller awaits the job's completion through BullMQ's queue events, listening before it adds
 * the job: an answer faster than the caller's first read of the events is still heard.
 */
import { DelayedError, QueueEvents, type Job, type Queue } from 'bullmq';
import { isTerminal } from '../domain/run-model.js';
import { NodeErrorData } from '../errors/node-error.js';
import { JOB, ToolCallJobData, toolCallJobId } from '../queues/catalog.js';
import { keepJobs } from '../queues/retention.js';
import type { RunQueues } from '../queues/run-jobs.js';
import { closeRedis, duplicateClient, type RedisClient } from '../state/redis-client.js';
import { isCustomTool, toolUnserved, type CustomTool } from '../tools/custom-tool.js';
import type { ToolOutcome } from '../tools/tool.js';
import type { ExecutorDeps, RemoteToolCaller } from './deps.js';
import { SHUTDOWN_MESSAGE } from './invoke-tool.js';
import { runToolCall } from './node-context.js';
import { linkedAbort } from './linked-abort.js';

/**
 * How much longer than its time limit a caller waits for a remote call's answer: the worker's
 * own round trips (taking the job, reading secrets, answering) on top of the tool's time.
 */
export const REMOTE_CALL_MARGIN_MS = 5_000;

/** How long a call job of a tool this process has no code for waits before it is offered again. */
const NOT_SERVED_HERE_DELAY_MS = 1_000;

const aborted = (message: string): ToolOutcome => ({ ok: false, error: { code: 'aborted', message } });

/** A call job's return value as the caller reads it: an outcome, or an `internal` error saying why not. */
function outcomeOf(value: unknown): ToolOutcome {
  if (typeof value === 'object' && value !== null && 'ok' in value) {
    const v = value as { ok: unknown; output?: unknown; error?: unknown };
    if (v.ok === true) return { ok: true, output: v.output };
    const error = NodeErrorData.safeParse(v.error);
    if (v.ok === false && error.success) return { ok: false, error: error.data };
  }
  return { ok: false, error: { code: 'internal', message: 'a remote tool call answered no outcome' } };
}

export interface RemoteToolCallsOptions {
  readonly queues: Pick<RunQueues, 'shardOf' | 'retention'>;
  /** A connection each queue's QueueEvents duplicates for its blocking reads. */
  readonly connection: RedisClient;
  /**
   * The live workers that serve `tool` on `queue`, as the tool catalog last read says: with none,
   * a call fails at once instead of waiting out its time limit. Absent: not checked.
   */
  readonly liveWorkers?: (tool: string, queue: string) => number;
}

/** The calling side: sends calls to their tools' queues and awaits their outcomes. */
export class RemoteToolCalls implements RemoteToolCaller {
  /** One QueueEvents per queue called so far, by the queue's qualified name (opened on first use). */
  private readonly events = new Map<string, Promise<OpenEvents>>();
  private closed = false;

  constructor(private readonly options: RemoteToolCallsOptions) {}

  async call(
    tool: CustomTool,
    data: Omit<ToolCallJobData, 'deadlineAt'>,
    stops: { readonly runSignal: AbortSignal; readonly shutdown?: AbortSignal },
  ): Promise<ToolOutcome> {
    const { queue: queueName } = tool.custom;
    if (this.options.liveWorkers?.(tool.name, queueName) === 0)
      return { ok: false, error: toolUnserved(tool.name, queueName) };
    if (stops.runSignal.aborted) return aborted('run aborted');
    const queue = (await this.options.queues.shardOf(data.runId)).toolQueue(queueName);
    const waitMs = data.timeoutMs + REMOTE_CALL_MARGIN_MS;
    const events = await this.eventsOf(queue);
    // The same id for the same call of the same attempt: a redelivered agent turn gets the call
    // in flight (or its answer) rather than a second call.
    const job = await queue.add(
      JOB.call,
      { ...data, deadlineAt: Date.now() + data.timeoutMs } satisfies ToolCallJobData,
      { jobId: toolCallJobId(data), ...keepJobs(this.options.queues.retention) },
    );
    const linked = linkedAbort([stops.runSignal, ...(stops.shutdown ? [stops.shutdown] : [])], waitMs);
    const stop = linked.signal;
    // BullMQ's own wait outlives ours by a little, so its listeners are always removed. It reads
    // the job's state once its listeners are on: a call answered before (a redelivered call's job
    // kept from its first delivery, or a very fast worker) is read back, not waited for.
    const finished = job.waitUntilFinished(events, waitMs + 1_000);
    finished.catch(() => undefined);
    let onStop: () => void = () => undefined;
    const stopped = new Promise<ToolOutcome>((resolve) => {
      onStop = () => {
        if (stops.runSignal.aborted) resolve(aborted('run aborted'));
        else if (stops.shutdown?.aborted) resolve(aborted(SHUTDOWN_MESSAGE));
        else
          resolve({
            ok: false,
            error: {
              code: 'timeout',
              message: `no answer from queue "${queueName}" within ${waitMs} ms (the call's limit of ${data.timeoutMs} ms and ${REMOTE_CALL_MARGIN_MS} ms for the round trip)`,
            },
          });
      };
      if (stop.aborted) onStop();
      else stop.addEventListener('abort', onStop, { once: true });
    });
    try {
      return await Promise.race([
        finished.then(outcomeOf, (err: Error) => ({
          ok: false as const,
          error: { code: 'internal' as const, message: `remote tool call failed: ${err.message}` },
        })),
        stopped,
      ]);
    } finally {
      stop.removeEventListener('abort', onStop);
      linked.release();
    }
  }

  /** The queue's events, opened on first use and ready (connected) when this answers. */
  private eventsOf(queue: Queue): Promise<QueueEvents> {
    const known = this.events.get(queue.qualifiedName);
    if (known) return known.then((open) => open.events);
    if (this.closed) return Promise.reject(new Error('remote tool calls are closed'));
    const opening = this.openEvents(queue);
    this.events.set(queue.qualifiedName, opening);
    // A queue whose events could not be opened is tried again by its next call.
    opening.catch(() => {
      if (this.events.get(queue.qualifiedName) === opening) this.events.delete(queue.qualifiedName);
    });
    return opening.then((open) => open.events);
  }

  /**
   * Reads the queue's events from the stream's last entry as it is now, not from `$`: `$` would
   * mean "from when the first blocking read reaches Redis", which can come after a call added
   * meanwhile was already answered, and that answer would never be heard.
   */
  private async openEvents(queue: Queue): Promise<OpenEvents> {
    const own = this.options.connection;
    const [last] = await own.xrevrange(queue.toKey('events'), '+', '-', 'COUNT', 1);
    // A connection of its own: its reads block.
    const connection = duplicateClient(own);
    const events = new QueueEvents(queue.name, {
      connection,
      prefix: queue.opts.prefix!,
      lastEventId: last?.[0] ?? '0-0',
    });
    // Connection errors are retried by ioredis; a QueueEvents without a listener prints them.
    events.on('error', () => undefined);
    try {
      await events.waitUntilReady();
    } catch (err) {
      await closeEvents({ events, connection });
      throw err;
    }
    return { events, connection };
  }

  async close(): Promise<void> {
    this.closed = true;
    const opening = [...this.events.values()];
    this.events.clear();
    await Promise.all(opening.map((open) => open.then(closeEvents, () => undefined)));
  }
}

interface OpenEvents {
  readonly events: QueueEvents;
  readonly connection: RedisClient;
}

async function closeEvents({ events, connection }: OpenEvents): Promise<void> {
  await events.close().catch(() => undefined);
  await closeRedis(connection);
}

/**
 * The serving side: runs a call job on a worker of the tool's queue and answers its outcome. A
 * worker without the tool's code (a tool on the shared node queue that not every worker loads)
 * puts the job back for another; a job taken after its caller stopped waiting answers `timeout`
 * without running; a run that ended answers `aborted`. A worker shutting down mid-call puts the job
 * back, its call aborted, for another worker to make again (the same Idempotency-Key).
 */
export async function executeToolCallJob(
  deps: ExecutorDeps,
  job: Job,
  token: string | undefined,
): Promise<ToolOutcome> {
  const data = ToolCallJobData.parse(job.data);
  const left = data.deadlineAt - Date.now();
  if (left <= 0)
    return {
      ok: false,
      error: {
        code: 'timeout',
        message: `the call waited in its queue past its time limit of ${data.timeoutMs} ms`,
      },
    };
  const tool = deps.tools.get(data.tool);
  if (!tool || !isCustomTool(tool) || !tool.codeHere) {
    deps.logger.warn(
      { runId: data.runId, nodeId: data.nodeId, tool: data.tool },
      'a call job of a custom tool this process has no code for: put back in its queue',
    );
    return putBack(job, token, Math.min(NOT_SERVED_HERE_DELAY_MS, left));
  }
  // Tracked before reading the run's status, so an abort published in between is not missed.
  const tracked = deps.aborts.track(data.runId);
  try {
    const status = await deps.store.status(data.runId);
    if (status === null || isTerminal(status)) return aborted('run aborted');
    const outcome = await runToolCall(
      deps,
      {
        runId: data.runId,
        nodeId: data.nodeId,
        tenant: data.tenant,
        agentId: data.agentId,
        attempt: data.attempt,
        log: deps.logger.child({
          runId: data.runId,
          nodeId: data.nodeId,
          attempt: data.attempt,
          callId: data.callId,
        }),
        runSignal: tracked.signal,
        ...(data.expectedSchema !== undefined ? { expectedSchema: data.expectedSchema } : {}),
      },
      tool,
      data.args,
      {
        timeoutMs: Math.min(data.timeoutMs, left),
        secrets: data.secrets,
        idempotencyKey: data.idempotencyKey,
      },
    );
    if (!outcome.ok && outcome.error.code === 'aborted' && deps.shutdown?.aborted && !tracked.signal.aborted)
      return putBack(job, token, 0);
    return outcome;
  } finally {
    tracked.release();
  }
}

async function putBack(job: Job, token: string | undefined, delayMs: number): Promise<never> {
  if (token === undefined) throw new Error('putting a call job back needs a worker token');
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}
