/**
 * Ending runs that pass their deadline. A run gets its deadline when it starts (`start-run-6.lua`,
 * which also puts it among the run deadlines, a sorted set by deadline) and every node checks it as
 * it begins; a run whose nodes are still running or parked when it passes is ended here: the plan
 * pool sweeps the run deadlines every `TETRALOOP_DEADLINE_SWEEP_MS`, decides each running run past
 * its deadline `timed_out` (its nodes are aborted, its parked jobs woken to end) and takes it off
 * them; settling takes a run off them too. Before, each run had a delayed BullMQ job for its
 * deadline, added when it started and removed when it settled: about 28 Redis commands and two
 * BullMQ calls per run, against a `ZADD` and a `ZREM` inside scripts the run makes anyway. The
 * price is precision: a run ends up to one sweep interval after its deadline.
 */
import { deadlineError } from '../errors/run-error.js';
import { nowIso } from '../domain/clock.js';
import { wakeParkedNodes } from '../queues/run-jobs.js';
import type { ExecutorDeps } from './deps.js';

/** Most runs one sweep ends; the next sweep goes on with the rest. */
export const DEADLINES_PER_SWEEP = 100;

/**
 * Ends the runs whose deadline passed by `now` (at most DEADLINES_PER_SWEEP). Several plan
 * processes may sweep at once: the first decision wins, the others find the run decided. Answers
 * how many runs this sweep decided.
 */
export async function sweepDeadlines(deps: ExecutorDeps, now = Date.now()): Promise<number> {
  let ended = 0;
  for (const runId of await deps.store.dueDeadlines(now, DEADLINES_PER_SWEEP)) {
    // One run that cannot be read does not hold the others back; it is looked at again next time.
    try {
      if (await endPastDeadline(deps, runId, null, now)) ended += 1;
    } catch (err) {
      deps.logger.warn({ runId, err }, 'could not end a run past its deadline');
    }
  }
  return ended;
}

/**
 * Decides `runId` `timed_out` when it is running and past its deadline, and wakes its parked
 * nodes. A run that is not running, or gone, leaves the run deadlines (a queued run is put back
 * when it starts); only an entry still due leaves, so a run started again since keeps its new one.
 * `generation`: a deadline job of an older process names one, and fired when its delay ran out, by
 * its own clock: for it the run's generation is checked instead of the time. Answers whether this
 * call decided it.
 */
export async function endPastDeadline(
  deps: ExecutorDeps,
  runId: string,
  generation: number | null,
  now = Date.now(),
): Promise<boolean> {
  const view = await deps.store.deadlineView(runId);
  if (view === null || view.status !== 'running') {
    await deps.store.dropDeadline(runId, now);
    return false;
  }
  // A deadline job of a generation replanned since speaks for nothing; the sweep goes by the clock.
  if (generation !== null ? view.generation !== generation : (view.deadlineAt ?? 0) > now) return false;
  const decided = await deps.store.decideError(
    runId,
    deadlineError(view.timeoutSeconds),
    nowIso(),
    generation ?? view.generation,
  );
  if (decided) {
    deps.logger.info({ runId }, 'run timed out');
    await wakeParkedNodes(deps.store, deps.queues, runId);
  }
  await deps.store.dropDeadline(runId, now);
  return decided;
}
