/**
 * Schedules, pure: what a client asks for (`POST /v1/schedules`), what is stored, when a schedule
 * fires next (BullMQ's own repeat strategy, so the times computed here are the times its job
 * schedulers fire at), and what one firing does. The store, the queue and the runs are elsewhere
 * (`state/schedule-store.ts`, `schedule-service.ts`).
 */
import { getNextMillis } from 'bullmq';
import { z } from 'zod';
import { OriginId } from '../domain/run-model.js';

/** Shortest interval of an `everyMs` schedule. */
export const MIN_EVERY_MS = 1000;
/** Longest interval of an `everyMs` schedule: a year. */
export const MAX_EVERY_MS = 366 * 86_400_000;

export const OVERLAP_POLICIES = ['skip', 'allow', 'cancel_previous'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];
export const CATCH_UP_POLICIES = ['none', 'latest'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];

/** Whether `zone` is an IANA time zone this runtime knows (`Europe/Paris`, `UTC`). */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** When a schedule fires: a cron pattern in a time zone, or a fixed interval. */
export type Cadence = { readonly cron: string; readonly timezone: string } | { readonly everyMs: number };

/**
 * The first firing of `cadence` after `millis` (undefined: none, e.g. a date that has passed);
 * throws on a pattern the cron parser refuses.
 */
export function nextFiring(cadence: Cadence, millis: number): number | undefined {
  return 'cron' in cadence
    ? getNextMillis(millis, { pattern: cadence.cron, tz: cadence.timezone })
    : getNextMillis(millis, { every: cadence.everyMs });
}

/** Why a cron pattern (in its zone) cannot be used, or undefined when it can. */
export function cronProblem(cron: string, timezone: string): string | undefined {
  try {
    const next = nextFiring({ cron, timezone }, Date.now());
    return next !== undefined && Number.isFinite(next) ? undefined : 'the pattern never fires';
  } catch (err) {
    return `not a cron pattern: ${err instanceof Error ? err.message : String(err)}`;
  }
}

const ScheduleFields = {
  name: z.string().min(1).max(200),
  /** Five fields (minute first) or six (seconds first), as BullMQ's cron parser reads them. */
  cron: z.string().min(1).max(200),
  /** IANA zone the cron pattern is read in. @defaultValue "UTC" */
  timezone: z.string().max(64).refine(isTimeZone, 'not an IANA time zone (e.g. Europe/Paris, UTC)'),
  everyMs: z.number().int().min(MIN_EVERY_MS).max(MAX_EVERY_MS),
  /** A run request (`POST /v1/runs` body); checked whole when the schedule is made or changed. */
  request: z.record(z.string(), z.unknown()),
  overlap: z.enum(OVERLAP_POLICIES),
  catchUp: z.enum(CATCH_UP_POLICIES),
  paused: z.boolean(),
};

/** Checks what only the whole body can say: one cadence, and a zone only with a pattern. */
function checkCadence(
  s: { cron?: string | undefined; everyMs?: number | undefined; timezone?: string | undefined },
  ctx: z.RefinementCtx,
  whole: boolean,
): void {
  if (s.cron !== undefined && s.everyMs !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['everyMs'], message: 'give cron or everyMs, not both' });
  } else if (whole && s.cron === undefined && s.everyMs === undefined) {
    ctx.addIssue({ code: 'custom', path: ['cron'], message: 'give cron or everyMs' });
  }
  if (s.timezone !== undefined && s.everyMs !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['timezone'], message: 'a time zone applies to a cron pattern' });
  }
  if (s.cron !== undefined) {
    const problem = cronProblem(s.cron, s.timezone ?? 'UTC');
    if (problem) ctx.addIssue({ code: 'custom', path: ['cron'], message: problem });
  }
}

/** Body of `POST /v1/schedules`. */
export const ScheduleRequest = z
  .strictObject({
    name: ScheduleFields.name,
    cron: ScheduleFields.cron.optional(),
    timezone: ScheduleFields.timezone.optional(),
    everyMs: ScheduleFields.everyMs.optional(),
    request: ScheduleFields.request,
    /** @defaultValue "skip" */
    overlap: ScheduleFields.overlap.default('skip'),
    /** @defaultValue "none" */
    catchUp: ScheduleFields.catchUp.default('none'),
    /** @defaultValue false */
    paused: ScheduleFields.paused.default(false),
  })
  .superRefine((s, ctx) => checkCadence(s, ctx, true));
export type ScheduleRequest = z.infer<typeof ScheduleRequest>;

/**
 * Body of `PATCH /v1/schedules/:id`: the fields to change. A new cadence replaces the old one
 * (`cron` drops `everyMs` and the other way round).
 */
export const SchedulePatch = z
  .strictObject({
    name: ScheduleFields.name.optional(),
    cron: ScheduleFields.cron.optional(),
    timezone: ScheduleFields.timezone.optional(),
    everyMs: ScheduleFields.everyMs.optional(),
    request: ScheduleFields.request.optional(),
    overlap: ScheduleFields.overlap.optional(),
    catchUp: ScheduleFields.catchUp.optional(),
    paused: ScheduleFields.paused.optional(),
  })
  .superRefine((s, ctx) => checkCadence(s, ctx, false));
export type SchedulePatch = z.infer<typeof SchedulePatch>;

/** The sense job a schedule's firing is, and its payload. */
export const SCHEDULE_FIRE_JOB = 'schedule-fire';
export const ScheduleFireData = z.object({ tenant: z.string(), scheduleId: OriginId });
export type ScheduleFireData = z.infer<typeof ScheduleFireData>;

/** How a schedule's firings went: counted by outcome (`FIRING_OUTCOMES`). */
export const FIRING_OUTCOMES = [
  /** A run was started. */
  'started',
  /** `overlap: skip`: the previous run was still active. */
  'skipped_overlap',
  /** `catchUp: none`: the firing came after a later one was already due (the deployment was down). */
  'missed',
  /** The run request was refused when it fired (an agent or a ceiling changed since). */
  'refused',
] as const;
export type FiringOutcome = (typeof FIRING_OUTCOMES)[number];

/** A schedule as stored and shown. */
export const Schedule = z.object({
  id: OriginId,
  name: z.string(),
  cron: z.string().nullable(),
  timezone: z.string().nullable(),
  everyMs: z.number().int().nullable(),
  request: z.record(z.string(), z.unknown()),
  overlap: z.enum(OVERLAP_POLICIES),
  catchUp: z.enum(CATCH_UP_POLICIES),
  paused: z.boolean(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type Schedule = z.infer<typeof Schedule>;

/** What a schedule's firings did: the last one, and a count by outcome. */
export const ScheduleState = z.object({
  lastFiredAt: z.string().nullable(),
  lastRunId: z.string().nullable(),
  lastOutcome: z.enum(FIRING_OUTCOMES).nullable(),
  firings: z.record(z.string(), z.number().int().nonnegative()),
});
export type ScheduleState = z.infer<typeof ScheduleState>;

/** A schedule's cadence, from its stored fields. */
export const cadenceOf = (s: Pick<Schedule, 'cron' | 'timezone' | 'everyMs'>): Cadence =>
  s.cron !== null ? { cron: s.cron, timezone: s.timezone ?? 'UTC' } : { everyMs: s.everyMs! };

/** A stored schedule as the request that would make it: what a patch is applied to. */
export function requestOf(s: Schedule): ScheduleRequest {
  return {
    name: s.name,
    ...(s.cron !== null ? { cron: s.cron, timezone: s.timezone ?? 'UTC' } : { everyMs: s.everyMs! }),
    request: s.request,
    overlap: s.overlap,
    catchUp: s.catchUp,
    paused: s.paused,
  };
}

/**
 * A patch applied to a schedule's request, to be checked whole again (`ScheduleRequest`): a new
 * cadence replaces the old one (`cron` drops `everyMs`, keeping the zone unless one is given, and
 * `everyMs` drops `cron` and its zone).
 */
export function patched(previous: ScheduleRequest, patch: SchedulePatch): Record<string, unknown> {
  const { cron, timezone, everyMs, ...rest } = previous;
  const cadence =
    patch.everyMs !== undefined
      ? { everyMs: patch.everyMs, ...(patch.timezone !== undefined ? { timezone: patch.timezone } : {}) }
      : {
          ...(cron !== undefined ? { cron, timezone } : { everyMs }),
          ...stripUndefined(patch, ['cron', 'timezone']),
        };
  return {
    ...rest,
    ...stripUndefined(patch, ['name', 'request', 'overlap', 'catchUp', 'paused']),
    ...cadence,
  };
}

function stripUndefined<T extends object>(value: T, keys: readonly (keyof T)[]): Partial<T> {
  return Object.fromEntries(
    keys.filter((k) => value[k] !== undefined).map((k) => [k, value[k]]),
  ) as Partial<T>;
}

/** The schedule a request makes (a create), or leaves (a patch of `previous`). */
export function scheduleOf(
  id: string,
  body: ScheduleRequest,
  previous: Schedule | null,
  now: Date,
): Schedule {
  return {
    id,
    name: body.name,
    cron: body.cron ?? null,
    timezone: body.cron !== undefined ? (body.timezone ?? 'UTC') : null,
    everyMs: body.everyMs ?? null,
    request: body.request,
    overlap: body.overlap,
    catchUp: body.catchUp,
    paused: body.paused,
    createdAt: previous?.createdAt ?? now.toISOString(),
    updatedAt: now.toISOString(),
  };
}

/**
 * The idempotency key of the run one firing starts: the same for every delivery of that firing,
 * so a firing handled twice (a job redelivered after its worker died) makes one run.
 */
export const firingKey = (scheduleId: string, firedAt: number): string => `schedule:${scheduleId}:${firedAt}`;

/** What one firing does. */
export type FiringDecision =
  | { readonly kind: 'start'; readonly cancelPrevious: boolean }
  | { readonly kind: 'skip'; readonly outcome: 'skipped_overlap' | 'missed' };

/**
 * How late a firing may be handled and still count as on time, whatever its period: a busy
 * deployment's lag is not downtime.
 */
export const CATCH_UP_GRACE_MS = 60_000;

/**
 * What a firing due at `firedAt` and handled at `now` does. It is a catch-up when the next firing
 * after it was already due and it is more than `CATCH_UP_GRACE_MS` late (the deployment was down
 * at least a whole period): `catchUp: none` skips it, `latest` runs it — once, as BullMQ keeps one
 * pending firing per schedule. Then the overlap policy, when the previous run is still active.
 */
export function decideFiring(
  schedule: Pick<Schedule, 'cron' | 'timezone' | 'everyMs' | 'overlap' | 'catchUp'>,
  firing: { readonly firedAt: number; readonly now: number; readonly previousActive: boolean },
): FiringDecision {
  if (schedule.catchUp === 'none' && firing.now - firing.firedAt > CATCH_UP_GRACE_MS) {
    const next = nextFiring(cadenceOf(schedule), firing.firedAt);
    if (next !== undefined && firing.now >= next) return { kind: 'skip', outcome: 'missed' };
  }
  if (!firing.previousActive) return { kind: 'start', cancelPrevious: false };
  switch (schedule.overlap) {
    case 'skip':
      return { kind: 'skip', outcome: 'skipped_overlap' };
    case 'allow':
      return { kind: 'start', cancelPrevious: false };
    case 'cancel_previous':
      return { kind: 'start', cancelPrevious: true };
  }
}
