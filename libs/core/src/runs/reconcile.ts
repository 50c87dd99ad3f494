/**
 * The reconciler: finds runs accepted but never started because their root job was never
 * enqueued (the API died between storing a run and enqueueing it, a sense process died between
 * giving a session run its turn and starting it) and enqueues them. Root job ids derive from the
 * run, so enqueueing a run that has its job adds nothing: the reconciler can only be late, never
 * start a run twice. `reconcileAction` is the rule, pure; `reconcileQueuedRuns` its I/O.
 */
import { Job } from 'bullmq';
import type { RunStatus } from '../domain/run-model.js';
import { runJobId } from '../queues/catalog.js';
import { enqueueRunRoot, type RunQueues } from '../queues/run-jobs.js';
import type { RunLifecycle } from '../state/runs/run-lifecycle.js';

/** What the reconciler knows about one run of the index. */
export interface QueuedRunFacts {
  /** Null when the run does not exist (expired, deleted, or never stored). */
  readonly status: RunStatus | null;
  /** Set for a child run: its parent's loop job enqueues it. */
  readonly parentRunId: string | null;
  readonly sessionKey: string | null;
  /** For a session run: whether its lane says it is its turn. */
  readonly laneTurn: boolean;
  /** The state of its root job, or null when it has none. */
  readonly job: JobState | null;
}

export type JobState =
  'waiting' | 'active' | 'delayed' | 'prioritized' | 'waiting-children' | 'completed' | 'failed' | 'unknown';

export const RECONCILE_ACTIONS = ['drop', 'wait', 'enqueue', 'retry'] as const;
/**
 * `drop`: take it off the index (gone, or no longer queued); `wait`: it waits legitimately (in its
 * lane, for its parent, for its job); `enqueue`: add its root job; `retry`: its root job ended
 * while the run is still queued, so the job is replaced.
 */
export type ReconcileAction = (typeof RECONCILE_ACTIONS)[number];

export function reconcileAction(run: QueuedRunFacts): ReconcileAction {
  if (run.status !== 'queued') return 'drop';
  // A child run is enqueued under its parent's job, which a redelivery of that job does again.
  if (run.parentRunId !== null) return 'wait';
  // A session run held back (`start: false`) waits for its lane's turn.
  if (run.sessionKey !== null && !run.laneTurn) return 'wait';
  if (run.job === null) return 'enqueue';
  if (run.job === 'completed' || run.job === 'failed') return 'retry';
  return 'wait';
}

export interface ReconcileDeps {
  readonly store: Pick<RunLifecycle, 'queuedRuns' | 'reconcileView' | 'unqueue' | 'requeueLater'>;
  readonly queues: RunQueues;
  /** The run a session's lane holds (its turn), or null. */
  readonly laneHolder: (sessionKey: string) => Promise<string | null>;
}

export interface ReconcileOptions {
  /** Runs accepted less than this long ago are left alone: their accept may still be under way. */
  readonly graceMs: number;
  /** At most this many runs per pass. @defaultValue 200 */
  readonly limit?: number;
  readonly now?: number;
}

export type ReconcileReport = Record<ReconcileAction, number>;

/** One pass over the queued runs accepted more than `graceMs` ago. */
export async function reconcileQueuedRuns(
  deps: ReconcileDeps,
  options: ReconcileOptions,
): Promise<ReconcileReport> {
  const now = options.now ?? Date.now();
  const report: ReconcileReport = { drop: 0, wait: 0, enqueue: 0, retry: 0 };
  for (const runId of await deps.store.queuedRuns(now - options.graceMs, options.limit ?? 200)) {
    const view = await deps.store.reconcileView(runId);
    const generation = view?.generation ?? 0;
    const job = view
      ? await Job.fromId((await deps.queues.shardOf(runId)).plan, runJobId(runId, generation))
      : undefined;
    const laneTurn = view?.sessionKey != null && (await deps.laneHolder(view.sessionKey)) === runId;
    const action = reconcileAction({
      status: view?.status ?? null,
      parentRunId: view?.parentRunId ?? null,
      sessionKey: view?.sessionKey ?? null,
      laneTurn,
      job: job ? await job.getState() : null,
    });
    report[action]++;
    switch (action) {
      case 'drop':
        await deps.store.unqueue(runId);
        break;
      case 'wait':
        // Looked at again after the others.
        await deps.store.requeueLater(runId, now);
        break;
      case 'retry':
        await job?.remove();
        await enqueueRunRoot(deps.queues, runId, generation);
        break;
      case 'enqueue':
        await enqueueRunRoot(deps.queues, runId, generation);
        break;
    }
  }
  return report;
}
