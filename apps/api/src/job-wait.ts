/**
 * Waiting a while for a BullMQ job to finish, as `Job.waitUntilFinished` does, without its flaw:
 * that one looks at the job from inside an async Promise executor, so a Redis error at that moment
 * (a connection that has just dropped) is an unhandled rejection, and Node ends the process. Here
 * the same error rejects the wait, for the request to answer it (`503`).
 */
import type { EventEmitter } from 'node:events';
import type { Queue, QueueEvents } from 'bullmq';

export type JobOutcome =
  | { readonly state: 'completed'; readonly value: unknown }
  | { readonly state: 'failed'; readonly reason: string }
  /** Not finished within the wait. */
  | { readonly state: 'pending' };

export function waitForJob(
  queue: Queue,
  events: QueueEvents,
  jobId: string,
  timeoutMs: number,
): Promise<JobOutcome> {
  // The per-job events (`completed:<id>`) are not in QueueEvents' typed listener map.
  const emitter = events as unknown as EventEmitter;
  return new Promise<JobOutcome>((resolve, reject) => {
    const completed = `completed:${jobId}`;
    const failed = `failed:${jobId}`;
    const onCompleted = (args: { returnvalue: unknown }): void =>
      end({ state: 'completed', value: args.returnvalue });
    const onFailed = (args: { failedReason: string }): void =>
      end({ state: 'failed', reason: args.failedReason });
    const timer = setTimeout(() => end({ state: 'pending' }), timeoutMs);
    const stop = (): void => {
      clearTimeout(timer);
      emitter.off(completed, onCompleted);
      emitter.off(failed, onFailed);
    };
    const end = (outcome: JobOutcome): void => {
      stop();
      resolve(outcome);
    };
    emitter.on(completed, onCompleted);
    emitter.on(failed, onFailed);
    // It may have finished before the listeners were on: looked at once they are, and the events
    // are being read.
    events
      .waitUntilReady()
      .then(() => queue.getJobState(jobId))
      .then(async (state) => {
        if (state !== 'completed' && state !== 'failed') return;
        // Read after the state: a job read before it finished holds no return value yet.
        const job = await queue.getJob(jobId);
        if (!job) return;
        if (state === 'completed') end({ state: 'completed', value: job.returnvalue });
        else end({ state: 'failed', reason: job.failedReason });
      })
      .catch((err: unknown) => {
        stop();
        reject(err instanceof Error ? err : new Error(String(err)));
      });
  });
}
