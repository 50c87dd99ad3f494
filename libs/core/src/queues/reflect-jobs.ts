/** The reflect queue's jobs: one reflection of one agent at a time, and the periodic sweep. */
import type { Queue } from 'bullmq';
import { z } from 'zod';

export const REFLECT_JOB = {
  /** Reflect on one agent's record now. */
  reflect: 'reflect',
  /** Periodic (job scheduler `reflect-sweep`): reflect on every agent with runs since its last reflection. */
  sweep: 'reflect-sweep',
} as const;

export const REFLECT_REASONS = [
  'runs',
  'failure-streak',
  'service-failures',
  'large-run',
  'interval',
  'feedback',
  'request',
] as const;
export type ReflectReason = (typeof REFLECT_REASONS)[number];

export const ReflectJobData = z.object({ agentId: z.string(), reason: z.enum(REFLECT_REASONS) });
export type ReflectJobData = z.infer<typeof ReflectJobData>;

/** The id of an agent's reflection job: while one waits or runs, asking again adds nothing. */
export const reflectJobId = (agentId: string): string => `reflect-${agentId}`;

/** Asks for a reflection of `agentId`; answers the job id (an existing one when one is pending). */
export async function enqueueReflection(
  queue: Queue,
  agentId: string,
  reason: ReflectReason,
): Promise<string> {
  const jobId = reflectJobId(agentId);
  await queue.add(REFLECT_JOB.reflect, { agentId, reason } satisfies ReflectJobData, {
    jobId,
    // Removed when done, so the next trigger can add the agent's next reflection under the same id.
    removeOnComplete: true,
    removeOnFail: true,
  });
  return jobId;
}
