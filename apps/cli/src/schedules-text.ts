/** What `tetraloop schedules` prints, pure: a schedule's cadence, its firings, and the table. */
import type { ScheduleView } from '@tetraloop/client';
import { FIRING_OUTCOMES } from '@tetraloop/core/schedules';
import { cut, shortTime, textTable } from './text-table.js';

const NAME_CHARS = 32;

/** Units an interval is shown in, largest first: `every 1h`, not `every 3600000ms`. */
const UNITS: readonly [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
];

/** An interval in the largest unit that divides it exactly: `90s`, `15m`, `1500ms`. */
export function intervalText(ms: number): string {
  const unit = UNITS.find(([, size]) => ms % size === 0);
  return unit ? `${ms / unit[1]}${unit[0]}` : `${ms}ms`;
}

/** `cron 0 7 * * 1-5 Europe/Paris` or `every 15m`. */
export function cadenceText(s: Pick<ScheduleView, 'cron' | 'timezone' | 'everyMs'>): string {
  if (s.cron !== null) return `cron ${s.cron} ${s.timezone ?? 'UTC'}`;
  return s.everyMs === null ? '-' : `every ${intervalText(s.everyMs)}`;
}

/** The firings counted by outcome, in the order outcomes are defined: `started 3, missed 1`. */
export function firingsText(firings: Readonly<Record<string, number>>): string {
  const known: readonly string[] = FIRING_OUTCOMES;
  const names = [
    ...known,
    ...Object.keys(firings)
      .filter((k) => !known.includes(k))
      .sort(),
  ];
  const counted = names.filter((n) => (firings[n] ?? 0) > 0).map((n) => `${n} ${firings[n]}`);
  return counted.length > 0 ? counted.join(', ') : '-';
}

/** Schedules as a table, one line each. */
export function schedulesTable(schedules: readonly ScheduleView[]): string {
  return textTable(
    ['ID', 'NAME', 'CADENCE', 'PAUSED', 'NEXT FIRE', 'LAST OUTCOME', 'LAST RUN', 'FIRINGS'],
    schedules.map((s) => [
      s.id,
      cut(s.name, NAME_CHARS),
      cadenceText(s),
      s.paused ? 'yes' : 'no',
      shortTime(s.nextFireAt),
      s.state.lastOutcome ?? '-',
      s.state.lastRunId ?? '-',
      firingsText(s.state.firings),
    ]),
  );
}
