import { describe, expect, it } from 'vitest';
import {
  CATCH_UP_GRACE_MS,
  ScheduleRequest,
  SchedulePatch,
  decideFiring,
  nextFiring,
  patched,
  requestOf,
  scheduleOf,
} from './schedule-model.js';

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number | undefined): string => new Date(ms!).toISOString();

describe('firing times (BullMQ’s cron parser)', () => {
  it('read a pattern in its time zone, across the spring change of Europe/Paris', () => {
    const weekdays7 = { cron: '0 7 * * 1-5', timezone: 'Europe/Paris' };
    // Friday 27 March 2026, 07:00 CET is 06:00 UTC; after the change on Sunday 29, 07:00 CEST is 05:00 UTC.
    expect(iso(nextFiring(weekdays7, at('2026-03-26T12:00:00Z')))).toBe('2026-03-27T06:00:00.000Z');
    expect(iso(nextFiring(weekdays7, at('2026-03-27T06:00:00Z')))).toBe('2026-03-30T05:00:00.000Z');
  });

  it('fire a time the spring change skips at the first instant after it, and a repeated time once', () => {
    const twoAm = { cron: '0 2 * * *', timezone: 'America/New_York' };
    // 8 March 2026: 02:00 does not exist in New York; the firing is at 03:00 EDT (07:00 UTC).
    expect(iso(nextFiring(twoAm, at('2026-03-08T05:00:00Z')))).toBe('2026-03-08T07:00:00.000Z');
    const halfPastOne = { cron: '30 1 * * *', timezone: 'America/New_York' };
    // 1 November 2026: 01:30 happens twice (EDT, then EST); the schedule fires at the first only.
    const first = nextFiring(halfPastOne, at('2026-10-31T12:00:00Z'));
    expect(iso(first)).toBe('2026-11-01T05:30:00.000Z');
    expect(iso(nextFiring(halfPastOne, first!))).toBe('2026-11-02T06:30:00.000Z');
  });

  it('space an interval from the epoch, as BullMQ’s `every` does', () => {
    expect(iso(nextFiring({ everyMs: 60_000 }, at('2026-12-02T10:00:00.500Z')))).toBe(
      '2026-12-02T10:01:00.000Z',
    );
  });
});

describe('schedule requests', () => {
  const request = { task: 'write the report' };
  const issues = (body: unknown): string[] => {
    const parsed = ScheduleRequest.safeParse(body);
    return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('take a cron pattern in a zone or an interval, and default the rest', () => {
    expect(
      ScheduleRequest.parse({ name: 'daily', cron: '0 7 * * 1-5', timezone: 'Europe/Paris', request }),
    ).toEqual({
      name: 'daily',
      cron: '0 7 * * 1-5',
      timezone: 'Europe/Paris',
      request,
      overlap: 'skip',
      catchUp: 'none',
      paused: false,
    });
    expect(issues({ name: 'tick', everyMs: 60_000, request })).toEqual([]);
  });

  it('name the field of each mistake', () => {
    expect(issues({ name: 'x', request })).toEqual(['cron: give cron or everyMs']);
    expect(issues({ name: 'x', cron: '* * * * *', everyMs: 1000, request })).toEqual([
      'everyMs: give cron or everyMs, not both',
    ]);
    expect(issues({ name: 'x', everyMs: 1000, timezone: 'UTC', request })).toEqual([
      'timezone: a time zone applies to a cron pattern',
    ]);
    expect(issues({ name: 'x', cron: 'every day', request })[0]).toMatch(/^cron: not a cron pattern/);
    expect(issues({ name: 'x', cron: '0 7 * * *', timezone: 'Mars/Base', request })[0]).toMatch(
      /^timezone: not an IANA/,
    );
    expect(issues({ name: 'x', everyMs: 10, request })[0]).toMatch(/^everyMs:/);
    expect(issues({ name: 'x', everyMs: 1000, request, overlap: 'queue' })[0]).toMatch(/^overlap:/);
  });

  it('apply a patch: a new cadence replaces the old one, a zone alone moves the pattern', () => {
    const daily = ScheduleRequest.parse({ name: 'd', cron: '0 7 * * *', timezone: 'Europe/Paris', request });
    const apply = (patch: unknown) => ScheduleRequest.parse(patched(daily, SchedulePatch.parse(patch)));
    expect(apply({ everyMs: 5000 })).toMatchObject({ everyMs: 5000 });
    expect(apply({ everyMs: 5000 }).cron).toBeUndefined();
    expect(apply({ timezone: 'Asia/Tokyo' })).toMatchObject({ cron: '0 7 * * *', timezone: 'Asia/Tokyo' });
    expect(apply({ cron: '0 8 * * *' })).toMatchObject({ cron: '0 8 * * *', timezone: 'Europe/Paris' });
    expect(apply({ paused: true, name: 'e' })).toMatchObject({ paused: true, name: 'e', cron: '0 7 * * *' });
    const every = ScheduleRequest.parse({ name: 'e', everyMs: 1000, request });
    expect(ScheduleRequest.safeParse(patched(every, SchedulePatch.parse({ timezone: 'UTC' }))).success).toBe(
      false,
    );
  });

  it('round-trip a stored schedule to its request', () => {
    const body = ScheduleRequest.parse({ name: 'd', cron: '0 7 * * *', request, overlap: 'allow' });
    const stored = scheduleOf('s1', body, null, new Date('2026-12-02T00:00:00Z'));
    expect(stored).toMatchObject({
      id: 's1',
      cron: '0 7 * * *',
      timezone: 'UTC',
      everyMs: null,
      overlap: 'allow',
    });
    expect(requestOf(stored)).toEqual({ ...body, timezone: 'UTC' });
  });
});

describe('a firing', () => {
  const every = { cron: null, timezone: null, everyMs: 60_000, overlap: 'skip', catchUp: 'none' } as const;
  const firedAt = at('2026-12-02T10:00:00Z');

  it('starts a run when nothing of the schedule is active', () => {
    expect(decideFiring(every, { firedAt, now: firedAt + 20, previousActive: false })).toEqual({
      kind: 'start',
      cancelPrevious: false,
    });
  });

  it('follows the overlap policy while the previous run is active', () => {
    const active = { firedAt, now: firedAt + 20, previousActive: true };
    expect(decideFiring(every, active)).toEqual({ kind: 'skip', outcome: 'skipped_overlap' });
    expect(decideFiring({ ...every, overlap: 'allow' }, active)).toEqual({
      kind: 'start',
      cancelPrevious: false,
    });
    expect(decideFiring({ ...every, overlap: 'cancel_previous' }, active)).toEqual({
      kind: 'start',
      cancelPrevious: true,
    });
  });

  it('is missed after downtime with catchUp none, run once with latest; lag within the grace is not downtime', () => {
    const late = { firedAt, now: firedAt + 5 * 60_000, previousActive: false };
    expect(decideFiring(every, late)).toEqual({ kind: 'skip', outcome: 'missed' });
    expect(decideFiring({ ...every, catchUp: 'latest' }, late)).toMatchObject({ kind: 'start' });
    const second = { ...every, everyMs: 1000 };
    expect(
      decideFiring(second, { firedAt, now: firedAt + CATCH_UP_GRACE_MS, previousActive: false }),
    ).toMatchObject({
      kind: 'start',
    });
    // A daily pattern handled an hour late: the next firing is not due, so it is on time.
    const daily = { ...every, everyMs: null, cron: '0 10 * * *', timezone: 'UTC' };
    expect(decideFiring(daily, { firedAt, now: firedAt + 3_600_000, previousActive: false })).toMatchObject({
      kind: 'start',
    });
  });
});
