import type { KeepJobs } from 'bullmq';

/** How long finished BullMQ jobs are kept; the run record has its own, longer retention. */
export interface JobRetention {
  /** @defaultValue 3600 (1 hour) */
  readonly completedAgeSeconds: number;
  /** @defaultValue 10000 */
  readonly completedCount: number;
  /** @defaultValue 86400 (1 day) */
  readonly failedAgeSeconds: number;
}

export const DEFAULT_JOB_RETENTION: JobRetention = {
  completedAgeSeconds: 3600,
  completedCount: 10_000,
  failedAgeSeconds: 86_400,
};

export function keepJobs(r: JobRetention): { removeOnComplete: KeepJobs; removeOnFail: KeepJobs } {
  return {
    removeOnComplete: { age: r.completedAgeSeconds, count: r.completedCount },
    removeOnFail: { age: r.failedAgeSeconds },
  };
}
