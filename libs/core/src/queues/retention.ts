import type { KeepJobs } from 'bullmq';

/** How long finished BullMQ jobs are kept; the run record has its own, longer retention. */
export interface JobRetention {
  /** @defaultValue 3600 (1 hour) */
  readonly completedAgeSeconds: number;
  /** @defaultValue 10000 */
  readonly completedCount: number;
  /** @defaultValue 86400 (1 day) */
  readonly failedAgeSeconds: number;
  /**
   * Completed node jobs kept (`TETRALOOP_NODE_JOBS_KEEP_COMPLETED`): 0 removes each as it completes.
   * @defaultValue 0
   */
  readonly nodeCompletedCount: number;
}

export const DEFAULT_JOB_RETENTION: JobRetention = {
  completedAgeSeconds: 3600,
  completedCount: 10_000,
  failedAgeSeconds: 86_400,
  nodeCompletedCount: 0,
};

export function keepJobs(r: JobRetention): { removeOnComplete: KeepJobs; removeOnFail: KeepJobs } {
  return {
    removeOnComplete: { age: r.completedAgeSeconds, count: r.completedCount },
    removeOnFail: { age: r.failedAgeSeconds },
  };
}

/**
 * The retention of a node job. With none kept, BullMQ's `moveToFinished` deletes the job at once
 * instead of adding it to the completed set and trimming that set by age and count (the parent's
 * bookkeeping is the same either way: the root job still learns the child completed). A node job
 * added again after its job is gone (a completing job redelivered after a crash) is a new job whose
 * `begin-node` finds the node's snapshot and does not run it (docs/execution-model.md).
 *
 * A node job that fails for good is removed too. It was added with `ignoreDependencyOnFailure`, so
 * the root stops waiting for it; but BullMQ puts a job id it still holds, and has not completed,
 * back among the parent's dependencies when the same id is added again, and a failed job never
 * runs: a node added again after its job failed (a crashed carrier's redelivery re-adding a node
 * it had begun) would wedge the root for good. Removed, the id is a new job that runs. The worker
 * logs every failure, and the run record holds the node's outcome.
 */
export function keepNodeJobs(r: JobRetention): { removeOnComplete: KeepJobs | true; removeOnFail: true } {
  return {
    removeOnComplete:
      r.nodeCompletedCount === 0 ? true : { age: r.completedAgeSeconds, count: r.nodeCompletedCount },
    removeOnFail: true,
  };
}
