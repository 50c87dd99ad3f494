/**
 * The cap on a tenant's running runs (`maxConcurrentRuns`, `TETRALOOP_TENANT_MAX_RUNNING`). A run
 * takes one of its tenant's slots when its root job first starts it, before it is planned; past the
 * cap the root job parks in the delayed set (holding no worker slot) and the run stays `queued`,
 * on its tenant's waiting list. A settling run gives its slot back and wakes the oldest waiting
 * runs; a parked root job also looks again every {@link RECHECK_MS} in case a wake was missed.
 * Child runs (loop iterations) serve a run that holds a slot and take none.
 */
import { DelayedError, Job } from 'bullmq';
import { DEFAULT_TENANT } from '../domain/tenant.js';
import { runJobId } from '../queues/catalog.js';
import type { RunHeader } from '../state/runs/run-read-model.js';
import type { ExecutorDeps } from './deps.js';

/** How often a waiting run's root job looks for a free slot if no settling run woke it. */
export const RECHECK_MS = 5000;

/**
 * Returns once the run may start (it holds a slot, or its tenant has no cap); otherwise parks the
 * root job until a slot frees (throws DelayedError).
 */
export async function admitRun(
  deps: ExecutorDeps,
  job: Job,
  token: string | undefined,
  runId: string,
  header: RunHeader,
): Promise<void> {
  const cap = deps.admission?.ceilings.maxRunning(header.tenant);
  if (!deps.admission || cap === undefined || header.parentRunId !== null) return;
  const { slots } = deps.admission;
  // A run that already runs (a replan's next generation) keeps running: it holds its slot.
  if (header.status !== 'queued') {
    if (header.status === 'running') await slots.acquire(header.tenant, runId, Number.MAX_SAFE_INTEGER);
    return;
  }
  if (await slots.acquire(header.tenant, runId, cap)) return;
  // At the cap: free the slots of runs that settled without giving them back, and try once more.
  if ((await slots.reconcile(header.tenant)) > 0 && (await slots.acquire(header.tenant, runId, cap))) return;
  if (token === undefined) throw new Error('holding a run back needs a worker token to park its root job');
  await job.moveToDelayed(Date.now() + RECHECK_MS, token);
  // A slot freed between the check and the move woke no one (the job was not delayed yet): look again.
  if ((await slots.release(header.tenant, null, cap, 0)).free > 0) await job.promote().catch(() => undefined);
  deps.logger.debug({ runId, tenant: header.tenant, cap }, 'run waits for a running slot of its tenant');
  throw new DelayedError();
}

/**
 * Gives back the slot of a run that settled (safe to repeat, and for runs that held none) and
 * wakes as many waiting runs of its tenant as there are free slots.
 */
export async function releaseRun(deps: ExecutorDeps, runId: string, tenant?: string): Promise<void> {
  if (!deps.admission) return;
  const of = tenant ?? (await deps.store.tenantOf(runId)) ?? DEFAULT_TENANT;
  const cap = deps.admission.ceilings.maxRunning(of);
  if (cap === undefined) return;
  const { slots } = deps.admission;
  const { free, waiting } = await slots.release(of, runId, cap);
  let woken = 0;
  const gone: string[] = [];
  for (const id of waiting) {
    if (woken >= free) break;
    const job = await Job.fromId(
      (await deps.queues.shardOf(id)).plan,
      runJobId(id, await deps.store.generation(id)),
    );
    if (!job) gone.push(id);
    else if (await job.isDelayed()) {
      await job.promote().catch(() => undefined);
      woken++;
    }
  }
  await slots.leaveWaiting(of, gone);
}
