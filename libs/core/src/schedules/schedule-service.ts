/**
 * Schedules: made, changed and deleted through the API, fired by BullMQ. Each schedule that is not
 * paused is a BullMQ job scheduler on the sense queue (`upsertJobScheduler` with its cron pattern
 * and zone, or `every`): Tetraloop keeps no timer of its own. A firing is a sense job; the worker
 * that takes it decides what it does (`decideFiring`) and starts the run with an idempotency key
 * made of the schedule and the firing's due time, so a firing handled twice makes one run.
 */
import type { Job, Queue } from 'bullmq';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { RunStatus } from '../domain/run-model.js';
import {
  GraphRejectedError,
  RequestRefusedError,
  type RunService,
  type SubmitResult,
} from '../runs/run-service.js';
import { RunRequest } from '../runs/run-request.js';
import type { RunStore } from '../state/runs/run-store.js';
import { newScheduleId, type ScheduleStore } from '../state/schedule-store.js';
import { metrics } from '../telemetry/metrics.js';
import {
  SCHEDULE_FIRE_JOB,
  ScheduleFireData,
  ScheduleRequest,
  cadenceOf,
  decideFiring,
  firingKey,
  nextFiring,
  patched,
  requestOf,
  scheduleOf,
  type Schedule,
  type SchedulePatch,
  type ScheduleState,
} from './schedule-model.js';

/** A schedule as the API shows it: itself, what its firings did, and when it fires next. */
export interface ScheduleView extends Schedule {
  readonly state: ScheduleState;
  /** The next due time (ISO); null while paused. */
  readonly nextFireAt: string | null;
}

export interface ScheduleServiceDeps {
  readonly schedules: ScheduleStore;
  readonly runs: RunService;
  readonly store: RunStore;
  readonly senseQueue: Queue;
  readonly logger: Logger;
}

/**
 * The due time of a firing: BullMQ names a job scheduler's jobs `repeat:<scheduler>:<due ms>`,
 * one job per due time, which is what makes a firing one job however often it is handled.
 */
export function dueTimeOf(job: Pick<Job, 'id' | 'opts' | 'timestamp'>): number {
  const tail = Number(job.id?.slice(job.id.lastIndexOf(':') + 1));
  return Number.isSafeInteger(tail) && tail > 0 ? tail : (job.opts.prevMillis ?? job.timestamp);
}

const ACTIVE: ReadonlySet<RunStatus> = new Set(['queued', 'running']);

/** A run request's problems, each at its path under `request`. */
function prefixed<E extends GraphRejectedError | RequestRefusedError>(err: E): E {
  const issues = err.issues.map((i) => ({ ...i, path: i.path === '' ? 'request' : `request.${i.path}` }));
  return (
    err instanceof GraphRejectedError ? new GraphRejectedError(issues) : new RequestRefusedError(issues)
  ) as E;
}

export class ScheduleService {
  constructor(private readonly deps: ScheduleServiceDeps) {}

  /** The BullMQ job scheduler of a tenant's schedule. */
  private schedulerId(tenant: string, id: string): string {
    return `schedule:${tenant}:${id}`;
  }

  /**
   * The schedule's run request checked as a submit would (its agent, its graph whole, the
   * ceilings): a schedule that could never start a run is refused when it is made.
   */
  private async checkRequest(tenant: string, raw: Record<string, unknown>): Promise<RunRequest> {
    const parsed = RunRequest.safeParse(raw);
    if (!parsed.success) {
      throw new RequestRefusedError(
        parsed.error.issues.map((i) => ({ path: ['request', ...i.path].join('.'), message: i.message })),
      );
    }
    try {
      await this.deps.runs.check(parsed.data, { tenant });
    } catch (err) {
      if (err instanceof GraphRejectedError || err instanceof RequestRefusedError) throw prefixed(err);
      throw err;
    }
    return parsed.data;
  }

  async create(tenant: string, body: ScheduleRequest, now = new Date()): Promise<ScheduleView> {
    await this.checkRequest(tenant, body.request);
    const schedule = scheduleOf(newScheduleId(), body, null, now);
    await this.deps.schedules.add(tenant, schedule);
    await this.sync(tenant, schedule);
    return this.view(tenant, schedule);
  }

  /** Applies a patch, checked whole; null when there is no such schedule. */
  async update(
    tenant: string,
    id: string,
    patch: SchedulePatch,
    now = new Date(),
  ): Promise<ScheduleView | null> {
    const previous = await this.deps.schedules.get(tenant, id);
    if (!previous) return null;
    const body = ScheduleRequest.parse(patched(requestOf(previous), patch));
    if (patch.request !== undefined) await this.checkRequest(tenant, body.request);
    const schedule = scheduleOf(id, body, previous, now);
    if (!(await this.deps.schedules.replace(tenant, schedule))) return null;
    await this.sync(tenant, schedule);
    return this.view(tenant, schedule);
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const deleted = await this.deps.schedules.delete(tenant, id);
    await this.deps.senseQueue.removeJobScheduler(this.schedulerId(tenant, id));
    return deleted;
  }

  /**
   * Removes the job schedulers of a tenant about to be deleted: its schedules' hashes go with its
   * keys, and a scheduler left behind would only find them gone at its next firing (a yearly one,
   * next year).
   */
  async removeTenant(tenant: string): Promise<void> {
    for (const schedule of await this.deps.schedules.list(tenant)) {
      await this.deps.senseQueue.removeJobScheduler(this.schedulerId(tenant, schedule.id));
    }
  }

  async get(tenant: string, id: string): Promise<ScheduleView | null> {
    const schedule = await this.deps.schedules.get(tenant, id);
    return schedule ? this.view(tenant, schedule) : null;
  }

  async list(tenant: string): Promise<ScheduleView[]> {
    return Promise.all((await this.deps.schedules.list(tenant)).map((s) => this.view(tenant, s)));
  }

  /**
   * Starts the schedule's run now, whatever its cadence, overlap or pause (`POST
   * /v1/schedules/:id/trigger`); null when there is no such schedule. An idempotency key makes a
   * retried trigger one run.
   */
  async trigger(tenant: string, id: string, idempotencyKey?: string): Promise<SubmitResult | null> {
    const schedule = await this.deps.schedules.get(tenant, id);
    if (!schedule) return null;
    const request = await this.checkRequest(tenant, schedule.request);
    const key = idempotencyKey === undefined ? undefined : `schedule:${id}:trigger:${idempotencyKey}`;
    const result = await this.deps.runs.submit(request, key, { tenant, origin: { scheduleId: id } });
    await this.deps.schedules.recordRun(tenant, id, result.runId);
    return result;
  }

  /**
   * One firing, in the worker that took its job. A schedule deleted meanwhile (or with its tenant)
   * takes its job scheduler with it; a paused one starts nothing.
   */
  async fire(job: Job, now = Date.now()): Promise<{ outcome: string; runId?: string }> {
    const { tenant, scheduleId } = ScheduleFireData.parse(job.data);
    const firedAt = dueTimeOf(job);
    const schedule = await this.deps.schedules.get(tenant, scheduleId);
    if (!schedule) {
      await this.deps.senseQueue.removeJobScheduler(this.schedulerId(tenant, scheduleId));
      return { outcome: 'gone' };
    }
    if (schedule.paused) return { outcome: 'paused' };
    const state = await this.deps.schedules.state(tenant, scheduleId);
    const previous = state.lastRunId;
    const previousStatus = previous === null ? null : await this.deps.store.status(previous);
    const decision = decideFiring(schedule, {
      firedAt,
      now,
      previousActive: previousStatus !== null && ACTIVE.has(previousStatus),
    });
    if (decision.kind === 'skip') {
      await this.record(tenant, scheduleId, firedAt, decision.outcome);
      return { outcome: decision.outcome };
    }
    if (decision.cancelPrevious && previous !== null) await this.deps.runs.cancel(previous);
    let result: SubmitResult;
    try {
      const request = RunRequest.parse(schedule.request);
      result = await this.deps.runs.submit(request, firingKey(scheduleId, firedAt), {
        tenant,
        origin: { scheduleId },
      });
    } catch (err) {
      // What was valid when the schedule was made may not be now (an agent, a model, a ceiling).
      if (!(
        err instanceof GraphRejectedError ||
        err instanceof RequestRefusedError ||
        err instanceof z.ZodError
      ))
        throw err;
      this.deps.logger.warn({ tenant, scheduleId, err: err.message }, 'schedule firing refused');
      await this.record(tenant, scheduleId, firedAt, 'refused');
      return { outcome: 'refused' };
    }
    metrics.scheduleLag.observe(Math.max(0, Date.now() - firedAt) / 1000);
    await this.record(tenant, scheduleId, firedAt, 'started', result.runId);
    return { outcome: 'started', runId: result.runId };
  }

  private async record(
    tenant: string,
    scheduleId: string,
    firedAt: number,
    outcome: 'started' | 'skipped_overlap' | 'missed' | 'refused',
    runId?: string,
  ): Promise<void> {
    metrics.scheduleFirings.inc({ outcome });
    await this.deps.schedules.recordFiring(tenant, scheduleId, {
      firedAt,
      outcome,
      ...(runId !== undefined ? { runId } : {}),
    });
  }

  /** Makes the job scheduler say what the schedule says: fire on its cadence, or not at all. */
  private async sync(tenant: string, schedule: Schedule): Promise<void> {
    const id = this.schedulerId(tenant, schedule.id);
    if (schedule.paused) {
      await this.deps.senseQueue.removeJobScheduler(id);
      return;
    }
    const cadence = cadenceOf(schedule);
    await this.deps.senseQueue.upsertJobScheduler(
      id,
      'cron' in cadence ? { pattern: cadence.cron, tz: cadence.timezone } : { every: cadence.everyMs },
      {
        name: SCHEDULE_FIRE_JOB,
        data: { tenant, scheduleId: schedule.id } satisfies ScheduleFireData,
        opts: { removeOnComplete: true, removeOnFail: { count: 100 } },
      },
    );
  }

  private async view(tenant: string, schedule: Schedule): Promise<ScheduleView> {
    const state = await this.deps.schedules.state(tenant, schedule.id);
    const next = schedule.paused ? undefined : nextFiring(cadenceOf(schedule), Date.now());
    return { ...schedule, state, nextFireAt: next === undefined ? null : new Date(next).toISOString() };
  }
}
