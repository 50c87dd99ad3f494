/**
 * A run's cap on its node jobs running at once (`maxParallelNodes`; seed `000_*` §2.3: L3 runs a
 * bounded batch). A node job takes one of its run's slots before it begins its node, and gives it
 * back when the job ends or parks (a retry's backoff, a map or loop waiting for its children, a
 * sleep): a parked node runs nothing. Past the cap the job parks in the delayed set, holding no
 * worker, its node still `queued`; a job giving its slot back wakes the oldest waiting ones, and a
 * parked job looks again on its own in case a wake was missed: after {@link RECHECK_MS}, then
 * twice as long each time it finds the cap again, up to {@link MAX_RECHECK_MS} (`recheckDelayMs`),
 * so thousands of jobs waiting at one cap do not all ask every few seconds. The parks are counted
 * from the time the job has been on the run's waiting list (`parksWithin`), which the slot script
 * answers when it puts the job there: parking writes nothing to the job but its move to the delayed
 * set, and taking a slot, which takes the job off the list, resets the count in the same script.
 * A node handed off to the job that released it (`handoff.ts`) runs in that job's slot. A map's
 * items are node jobs and take slots like any. A run without a cap reads and writes nothing here.
 */
import { DelayedError, type Job } from 'bullmq';
import { findNodeJob } from '../queues/run-jobs.js';
import type { ExecutorDeps } from './deps.js';
import type { CompiledPlan } from './plan-cache.js';

/** How soon a node job first parked at the cap looks for a free slot if no finishing job woke it. */
export const RECHECK_MS = 5000;
/** The longest a parked node job goes without looking again. */
export const MAX_RECHECK_MS = 60_000;

/**
 * How long a node job parks at its run's cap, having parked there `waits` times already since it
 * last held a slot: doubling from {@link RECHECK_MS} up to {@link MAX_RECHECK_MS}. Pure.
 */
export const recheckDelayMs = (waits: number): number =>
  Math.min(RECHECK_MS * 2 ** Math.max(0, waits), MAX_RECHECK_MS);

/**
 * How many times a node job on its run's waiting list for `waitedMs` has parked at the cap: the
 * rechecks of {@link recheckDelayMs} that fit in that time, counted up to the first at
 * {@link MAX_RECHECK_MS} (the later ones are as long). A recheck due within half of
 * {@link RECHECK_MS} counts as made: a delayed job is promoted a little after its time, and taken
 * a little later still, and its due time is the parking worker's clock while the worker that
 * promotes it reads its own (the time waited is Redis's). A job woken early that lost the slot to
 * another counts fewer, and rechecks sooner. Pure.
 */
export function parksWithin(waitedMs: number): number {
  let parks = 0;
  let due = 0;
  while (recheckDelayMs(parks) < MAX_RECHECK_MS) {
    due += recheckDelayMs(parks);
    if (due > waitedMs + RECHECK_MS / 2) break;
    parks++;
  }
  return parks;
}

/** The slot sets outlive the run's deadline by an hour; every take renews them. */
const ttlOf = (plan: Pick<CompiledPlan, 'timeoutSeconds'>): number => plan.timeoutSeconds + 3600;

/** What a job holding a slot gives back when it ends. */
export interface HeldNodeSlot {
  readonly runId: string;
  readonly cap: number;
  readonly jobId: string;
}

/**
 * Takes a slot of the job's run for `job`, when the run has a cap: answers what to give back, or
 * undefined when the run has none. At the cap, parks the job until a slot frees (throws DelayedError).
 */
export async function takeNodeSlot(
  deps: Pick<ExecutorDeps, 'nodeSlots' | 'queues' | 'logger'>,
  plan: Pick<CompiledPlan, 'runId' | 'maxParallelNodes' | 'timeoutSeconds'> | null,
  job: Job,
  token: string | undefined,
): Promise<HeldNodeSlot | undefined> {
  const cap = plan?.maxParallelNodes;
  if (!plan || !cap || !deps.nodeSlots || job.id === undefined) return undefined;
  const { sets } = deps.nodeSlots;
  const keys = deps.nodeSlots.keysOf(plan.runId);
  const held: HeldNodeSlot = { runId: plan.runId, cap, jobId: job.id };
  let take = await sets.acquire(keys, job.id, cap, ttlOf(plan));
  // At the cap: free the slots of jobs that ended without giving theirs back, and try once more.
  if (!take.held && (await forgetDeadHolders(deps, plan.runId)) > 0) {
    take = await sets.acquire(keys, job.id, cap, ttlOf(plan));
  }
  if (take.held) return held;
  if (token === undefined) throw new Error('holding a node back needs a worker token to park its job');
  await job.moveToDelayed(Date.now() + recheckDelayMs(parksWithin(take.waitedMs)), token);
  // A slot freed between the take and the move woke no one (the job was not delayed yet): look again.
  if ((await sets.release(keys, null, cap, 0)).free > 0) await job.promote().catch(() => undefined);
  deps.logger.debug({ runId: plan.runId, jobId: job.id, cap }, 'node job waits for a slot of its run');
  throw new DelayedError();
}

/**
 * Gives back a job's slot and wakes as many waiting node jobs of the run as there are free slots.
 * Never throws: a slot not given back is found by the next job at the cap.
 */
export async function giveNodeSlot(
  deps: Pick<ExecutorDeps, 'nodeSlots' | 'queues' | 'logger'>,
  held: HeldNodeSlot,
): Promise<void> {
  if (!deps.nodeSlots) return;
  try {
    const { sets } = deps.nodeSlots;
    const keys = deps.nodeSlots.keysOf(held.runId);
    const { free, waiting } = await sets.release(keys, held.jobId, held.cap);
    let woken = 0;
    const gone: string[] = [];
    for (const jobId of waiting) {
      if (woken >= free) break;
      const job = await findNodeJob(deps.queues, held.runId, jobId);
      if (!job) gone.push(jobId);
      else if (await job.isDelayed()) {
        await job.promote().catch(() => undefined);
        woken++;
      }
    }
    await sets.leaveWaiting(keys, gone);
  } catch (err) {
    deps.logger.warn({ err, runId: held.runId, jobId: held.jobId }, 'could not give a node slot back');
  }
}

/**
 * Frees the slots of holders that stopped running without giving theirs back (a process died):
 * those that took theirs more than {@link RECHECK_MS} ago and whose job is gone or not active. At
 * most one sweep per run per {@link RECHECK_MS} (a key with that TTL), so the jobs waiting at the
 * cap do not each read the holders' jobs. Answers how many were freed.
 */
async function forgetDeadHolders(
  deps: Pick<ExecutorDeps, 'nodeSlots' | 'queues'>,
  runId: string,
): Promise<number> {
  const { sets } = deps.nodeSlots!;
  const keys = deps.nodeSlots!.keysOf(runId);
  // One sweep per run per interval, however many jobs wait at the cap.
  if ((await sets.redis.set(`${keys.running}:sweep`, '1', 'PX', RECHECK_MS, 'NX')) === null) return 0;
  const done: [string, string][] = [];
  for (const [jobId, score] of await sets.heldFor(keys, RECHECK_MS)) {
    const job = await findNodeJob(deps.queues, runId, jobId);
    if (!job || !(await job.isActive())) done.push([jobId, score]);
  }
  return sets.forget(keys, done);
}

/** Deletes a settled run's slot sets (a run with a cap). */
export async function dropNodeSlots(
  deps: Pick<ExecutorDeps, 'nodeSlots'>,
  plan: Pick<CompiledPlan, 'runId' | 'maxParallelNodes'>,
): Promise<void> {
  if (!plan.maxParallelNodes || !deps.nodeSlots) return;
  const keys = deps.nodeSlots.keysOf(plan.runId);
  await deps.nodeSlots.sets.redis.del(keys.running, keys.waiting);
}
