/**
 * A run's way from queued to settled: the index of queued runs the reconciler reads, the start,
 * the outcome (decided once, ending the run's child runs with it), the end of a run that never
 * started, settling, resuming a settled run, and deleting one. Each change of status is one script.
 */
import {
  RunError,
  RunStatus,
  isTerminal,
  type LiveNodeState,
  type NodeSnapshot,
} from '../../domain/run-model.js';
import { RUN_ERROR_STATUS, cancelledError } from '../../errors/run-error.js';
import { queuedRunsKey, runDeadlinesKey, runNodeSlotKeys } from '../keys.js';
import { slotPipeline } from '../slot-multi.js';
import { multiReplies, pendingJson, snapshotJson, type RunContext } from './run-context.js';

export interface ReconcileView {
  readonly status: RunStatus;
  readonly generation: number;
  readonly parentRunId: string | null;
  readonly sessionKey: string | null;
}

export class RunLifecycle {
  constructor(private readonly ctx: RunContext) {}

  /**
   * Queued runs accepted before `before` (epoch ms), oldest first, at most `limit`: what the
   * reconciler looks at.
   */
  async queuedRuns(before: number, limit: number): Promise<string[]> {
    return this.ctx.redis.zrangebyscore(
      queuedRunsKey(this.ctx.options.prefix),
      '-inf',
      before,
      'LIMIT',
      0,
      limit,
    );
  }

  /**
   * Marks a settled run's follow-up (its slot, its session's lane, its webhooks) done by the node
   * job that settled it, so its root job's pass does not repeat it: a field of the settled run's
   * hash (never of a run that expired meanwhile); `resume-run-6.lua` clears it.
   */
  async markFollowedUp(runId: string): Promise<void> {
    await this.ctx.script('mark-followed-up-6', this.ctx.scriptKeys(runId), []);
  }

  /** Runs whose deadline (epoch ms) is at or before `now`, earliest first, at most `limit`. */
  async dueDeadlines(now: number, limit: number): Promise<string[]> {
    return this.ctx.redis.zrangebyscore(
      runDeadlinesKey(this.ctx.options.prefix),
      '-inf',
      now,
      'LIMIT',
      0,
      limit,
    );
  }

  /**
   * Takes a run off the run deadlines (it is past its deadline and decided, settled or gone),
   * unless its entry is no longer due by `dueBy` (epoch ms): a run started again since keeps its
   * new one.
   */
  async dropDeadline(runId: string, dueBy: number): Promise<void> {
    await this.ctx.script('drop-deadline-1', [runDeadlinesKey(this.ctx.options.prefix)], [runId, dueBy]);
  }

  /** What a deadline sweep reads of a run, in one read; null for an unknown run. */
  async deadlineView(runId: string): Promise<{
    status: RunStatus;
    generation: number;
    deadlineAt: number | null;
    timeoutSeconds: number;
  } | null> {
    const [status, generation, deadlineAt, timeoutSeconds] = await this.ctx.redis.hmget(
      this.ctx.keysOf(runId).meta,
      'status',
      'generation',
      'deadlineAt',
      'timeoutSeconds',
    );
    if (status === null) return null;
    return {
      status: RunStatus.parse(status),
      generation: Number(generation ?? 0),
      deadlineAt: deadlineAt === null ? null : Number(deadlineAt),
      timeoutSeconds: Number(timeoutSeconds ?? 0),
    };
  }

  /** Takes a run off the index of queued runs (it started, ended or is gone). */
  async unqueue(runId: string): Promise<void> {
    await this.ctx.redis.zrem(queuedRunsKey(this.ctx.options.prefix), runId);
  }

  /**
   * Moves a run that waits legitimately (in its lane, for its parent, for a running slot) to the
   * back of the index of queued runs, so the reconciler's next passes look at the others first.
   */
  async requeueLater(runId: string, at: number): Promise<void> {
    await this.ctx.redis.zadd(queuedRunsKey(this.ctx.options.prefix), 'XX', at, runId);
  }

  /** What the reconciler reads of a run: null for an unknown run. */
  async reconcileView(runId: string): Promise<ReconcileView | null> {
    const [status, generation, parentRunId, sessionKey] = await this.ctx.redis.hmget(
      this.ctx.keysOf(runId).meta,
      'status',
      'generation',
      'parentRunId',
      'sessionKey',
    );
    if (status === null) return null;
    return {
      status: RunStatus.parse(status),
      generation: Number(generation ?? 0),
      parentRunId: parentRunId ?? null,
      sessionKey: sessionKey ?? null,
    };
  }

  async status(runId: string): Promise<RunStatus | null> {
    const status = await this.ctx.redis.hget(this.ctx.keysOf(runId).meta, 'status');
    return status === null ? null : RunStatus.parse(status);
  }

  async generation(runId: string): Promise<number> {
    return Number((await this.ctx.redis.hget(this.ctx.keysOf(runId).meta, 'generation')) ?? 0);
  }

  /** Whether the run has settled (its current generation is final). */
  async isSettled(runId: string): Promise<boolean> {
    return (await this.settledState(runId)) === true;
  }

  /** Whether the run has settled, or null for an unknown run; cheaper than reading the document. */
  async settledState(runId: string): Promise<boolean | null> {
    const [status, finishedAt] = await this.ctx.redis.hmget(
      this.ctx.keysOf(runId).meta,
      'status',
      'finishedAt',
    );
    return status === null ? null : finishedAt !== null;
  }

  /**
   * Moves a queued run to running and marks `ready` queued; its keys then live until its deadline
   * plus the retention, so no wait of the run outlives them. Returns its status after (or `stale`)
   * and its deadline, which a replanned run keeps from before.
   */
  async start(
    runId: string,
    generation: number,
    ready: readonly string[],
    deadlineAt: number,
    now: string,
    /**
     * How many first nodes one carrier job takes (`executor/carrier-job.ts`), 0 for none. The run
     * keeps the width it started with: a redelivered start pass is answered that one.
     */
    carryWidth = 0,
  ): Promise<{ status: RunStatus | 'stale' | null; deadlineAt: number; carryWidth: number }> {
    // The script takes the run off the index of queued runs (on a cluster, as one of its index
    // writes, made just after it: the index is in another slot).
    const [status, deadline, width] = (await this.ctx.script('start-run-6', this.ctx.scriptKeys(runId), [
      now,
      deadlineAt,
      generation,
      JSON.stringify({ status: 'queued' } satisfies LiveNodeState),
      this.ctx.options.retentionSeconds,
      queuedRunsKey(this.ctx.options.prefix),
      runId,
      runDeadlinesKey(this.ctx.options.prefix),
      carryWidth,
      ...ready,
    ])) as [string | null, string | undefined | null, string | undefined | null];
    const at = deadline ? Number(deadline) : deadlineAt;
    const started = { deadlineAt: at, carryWidth: width ? Number(width) : 0 };
    if (status === 'stale') return { status: 'stale', ...started };
    return { status: status ? RunStatus.parse(status) : null, ...started };
  }

  /** Records `childRunId` as serving `runId`, so ending the parent ends it. */
  async addChild(runId: string, childRunId: string): Promise<void> {
    await this.ctx.script('add-child-6', this.ctx.scriptKeys(runId), [childRunId]);
  }

  async error(runId: string): Promise<RunError | null> {
    const raw = await this.ctx.redis.hget(this.ctx.keysOf(runId).meta, 'error');
    return raw ? RunError.parse(JSON.parse(raw)) : null;
  }

  /**
   * Sets the run's outcome if none is set yet; true when this call decided it. An outcome other
   * than succeeded also cancels the run's child runs (loop iterations over nested graphs), and
   * theirs, since they only exist to serve it.
   */
  async decide(
    runId: string,
    status: RunStatus,
    error: RunError | null,
    now: string,
    generation?: number,
  ): Promise<boolean> {
    return (await this.decideOutcome(runId, status, error, now, generation)).decided;
  }

  /**
   * Ends the run with `error` unless an outcome is set, with the status its code ends a run with
   * (`RUN_ERROR_STATUS`); true when this call decided it.
   */
  async decideError(runId: string, error: RunError, now: string, generation?: number): Promise<boolean> {
    return this.decide(runId, RUN_ERROR_STATUS[error.code], error, now, generation);
  }

  /** {@link decide}, also answering the run's status after it (null for an unknown run). */
  async decideOutcome(
    runId: string,
    status: RunStatus,
    error: RunError | null,
    now: string,
    generation?: number,
  ): Promise<{ decided: boolean; status: RunStatus | null }> {
    const [decided, children, current] = (await this.ctx.script('decide-run-6', this.ctx.scriptKeys(runId), [
      status,
      error ? JSON.stringify(error) : '',
      this.ctx.channels.abort,
      runId,
      now,
      generation ?? '',
    ])) as [number, string | null, string | null];
    const after = current ? RunStatus.parse(current) : null;
    if (children && after !== null && after !== 'succeeded' && after !== 'running' && after !== 'queued') {
      const parentEnded: RunError = {
        code: 'parent_ended',
        message: `the parent run ${runId} ended as ${after}`,
      };
      for (const child of JSON.parse(children) as string[]) await this.decideError(child, parentEnded, now);
    }
    return { decided: decided === 1, status: after };
  }

  /**
   * Ends a run none of whose nodes ran, in one step: unless an outcome is set, decides it with
   * `error` (the status its code ends a run with); then gives every node of its plan a snapshot
   * and settles it. With `error` null it only settles a run already decided. A running run is left
   * alone: its nodes may have run. Answers whether this call settled it and the run's status after
   * it (null for an unknown run).
   */
  async endUnstarted(
    runId: string,
    error: RunError | null,
    now: string,
  ): Promise<{ settled: boolean; status: RunStatus | null }> {
    const [settled, after] = (await this.ctx.script('end-unstarted-6', this.ctx.scriptKeys(runId), [
      error ? RUN_ERROR_STATUS[error.code] : '',
      error ? JSON.stringify(error) : '',
      now,
      this.ctx.channels.abort,
      this.ctx.channels.settled,
      runId,
      this.ctx.options.retentionSeconds,
    ])) as [number, string | null];
    if (after === null || isTerminal(RunStatus.parse(after))) await this.unqueue(runId);
    return { settled: settled === 1, status: after ? RunStatus.parse(after) : null };
  }

  /** Closes a run: fills in snapshots for nodes that never ran, stores the output, sets TTLs. */
  async settle(
    runId: string,
    generation: number,
    fill: ReadonlyMap<string, NodeSnapshot>,
    output: Record<string, unknown> | null,
    final: { status: RunStatus; error: RunError | null; generation: number },
    now: string,
  ): Promise<boolean> {
    const triples = [...fill].flatMap(([id, s]) => [id, snapshotJson(s), `node.${s.status}`]);
    const settled = await this.ctx.script('settle-run-6', this.ctx.scriptKeys(runId), [
      now,
      output ? JSON.stringify(output) : '',
      this.ctx.options.retentionSeconds,
      this.ctx.channels.settled,
      runId,
      generation,
      JSON.stringify(final),
      runDeadlinesKey(this.ctx.options.prefix),
      ...triples,
    ]);
    return settled === 1;
  }

  /**
   * Reopens a settled failed/timed_out run for the nodes in `rerun`, with `pending` as the new
   * readiness counters. Returns the new generation, or the status that prevented it.
   */
  async resume(
    runId: string,
    rerun: readonly string[],
    pending: ReadonlyMap<string, number>,
    timeoutSeconds: number,
  ): Promise<{ resumed: true; generation: number } | { resumed: false; status: string | null }> {
    const [status, generation] = (await this.ctx.script('resume-run-6', this.ctx.scriptKeys(runId), [
      pendingJson(pending),
      this.ctx.safetyTtl(timeoutSeconds),
      ...rerun,
    ])) as [string | null, number | undefined];
    return status === 'queued' && generation !== undefined
      ? { resumed: true, generation }
      : { resumed: false, status };
  }

  /** Whether the session reply of a run was written (see `markSessionReplied`). */
  async sessionReplied(runId: string): Promise<boolean> {
    return (await this.ctx.redis.hexists(this.ctx.keysOf(runId).meta, 'sessionReplied')) === 1;
  }

  /**
   * Marks a run's session reply written, after it was: a writer that dies in between leaves it
   * to the next pass, whose write the session's once-check makes a no-op if it had happened.
   */
  async markSessionReplied(runId: string): Promise<void> {
    await this.ctx.redis.hset(this.ctx.keysOf(runId).meta, 'sessionReplied', '1');
  }

  /** Deletes a run that never started (a prepared session run its lane did not need). */
  /**
   * Keeps the keys of runs waiting in a session's lane (not started) for `laneSafetyTtl` from now,
   * never shortening a longer expiry (GT): called when their lane starts the run ahead of them,
   * which may wait up to the longest a run may last. A run gone meanwhile is not brought back
   * (PEXPIRE writes no key).
   */
  async keepQueued(runIds: readonly string[]): Promise<void> {
    if (runIds.length === 0) return;
    const ttlMs = this.ctx.laneSafetyTtl() * 1000;
    const tx = slotPipeline(this.ctx.redis);
    for (const runId of runIds) for (const key of this.ctx.scriptKeys(runId)) tx.pexpire(key, ttlMs, 'GT');
    multiReplies(await tx.exec());
  }

  async delete(runId: string): Promise<void> {
    await this.ctx.redis.del(...this.runKeysWithSlots(runId));
    await this.unqueue(runId);
  }

  /** The run's keys and its node slot sets (a run with `maxParallelNodes`), which share its slot. */
  private runKeysWithSlots(runId: string): string[] {
    const slots = runNodeSlotKeys(this.ctx.options.prefix, runId);
    return [...this.ctx.scriptKeys(runId), slots.running, slots.waiting];
  }

  /**
   * Ends a run that has not (as cancelled: its running nodes abort, nothing else starts) and
   * deletes its keys; its jobs then find no run and do nothing. Answers the keys deleted.
   */
  async purge(runId: string): Promise<number> {
    const status = await this.status(runId);
    if (status !== null && !isTerminal(status)) {
      await this.decideError(runId, cancelledError('its tenant was deleted'), new Date().toISOString());
    }
    const deleted = await this.ctx.redis.del(...this.runKeysWithSlots(runId));
    await this.unqueue(runId);
    return deleted;
  }
}
