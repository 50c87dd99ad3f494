/**
 * `/console/schedules`: the tenant's schedules (`GET /v1/schedules`) — cadence, whether paused, the
 * next firing, the last firing's outcome and run, the firings counted by outcome — with buttons to
 * pause or resume one, run it now, and delete it, and a link to the runs it started (the runs list
 * searched by `scheduleId`).
 *
 * Like the triggers page, it is a `list-page.ts`: read again every few seconds, since a firing
 * happens in a worker and nothing streams a schedule's state.
 */
import { unwrap, type ScheduleView, type TetraloopClient } from '@tetraloop/client';
import { h } from './dom.js';
import { deleteButton, listPage, when, type Act } from './list-page.js';
import { paths } from './routes.js';

const COLUMNS = [
  'schedule',
  'cadence',
  'paused',
  'next firing',
  'last firing',
  'last outcome',
  'last run',
  'firings',
  'runs',
  '',
];

/** `cron 0 7 * * 1-5 (Europe/Paris)` or `every 900 s`. */
function cadence(s: ScheduleView): string {
  if (s.cron !== null) return `cron ${s.cron} (${s.timezone ?? 'UTC'})`;
  return s.everyMs === null ? '—' : `every ${s.everyMs / 1000} s`;
}

/** The firings counted by outcome, those that happened: `started 3, missed 1`. */
const firings = (counts: Readonly<Record<string, number>>): string =>
  Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([outcome, n]) => `${outcome} ${n}`)
    .join(', ') || '—';

export function schedulesPage(
  root: HTMLElement,
  client: TetraloopClient,
  fail: (err: unknown) => void,
): void {
  const actions = (s: ScheduleView, act: Act): HTMLDivElement => {
    const path = { params: { path: { id: s.id } } };
    const setPaused = (paused: boolean) => async (): Promise<undefined> => {
      unwrap(await client.api.PATCH('/v1/schedules/{id}', { ...path, body: { paused } }));
      return undefined;
    };
    return h(
      'div',
      { class: 'actions' },
      s.paused
        ? h(
            'button',
            { type: 'button', 'data-action': 'resume', onclick: act('Resume', setPaused(false)) },
            'Resume',
          )
        : h(
            'button',
            { type: 'button', 'data-action': 'pause', onclick: act('Pause', setPaused(true)) },
            'Pause',
          ),
      h(
        'button',
        {
          type: 'button',
          'data-action': 'trigger',
          onclick: act('Trigger now', async () => {
            const { runId } = unwrap(await client.api.POST('/v1/schedules/{id}/trigger', path));
            return `run ${runId} started.`;
          }),
        },
        'Trigger now',
      ),
      deleteButton(act, `Delete the schedule “${s.name}”? Its runs stay.`, async () => {
        unwrap(await client.api.DELETE('/v1/schedules/{id}', path));
      }),
    );
  };

  const row = (s: ScheduleView, act: Act): HTMLTableRowElement =>
    h(
      'tr',
      { 'data-schedule-id': s.id, 'data-paused': String(s.paused), 'data-last-run': s.state.lastRunId ?? '' },
      h('td', {}, s.name, h('br'), h('code', { class: 'muted' }, s.id)),
      h('td', {}, cadence(s)),
      h('td', {}, s.paused ? h('span', { class: 'badge' }, 'paused') : 'no'),
      h('td', { 'data-role': 'next-fire' }, when(s.nextFireAt)),
      h('td', {}, when(s.state.lastFiredAt)),
      h('td', {}, s.state.lastOutcome ?? '—'),
      h(
        'td',
        {},
        s.state.lastRunId
          ? h('a', { href: paths.run(s.state.lastRunId) }, s.state.lastRunId.slice(0, 8))
          : '—',
      ),
      h('td', {}, firings(s.state.firings)),
      h('td', {}, h('a', { href: paths.scheduleRuns(s.id), 'data-role': 'schedule-runs' }, 'runs')),
      h('td', {}, actions(s, act)),
    );

  listPage(
    root,
    {
      page: 'schedules',
      title: 'Schedules',
      role: 'schedules',
      columns: COLUMNS,
      empty: 'No schedules.',
      read: async () => unwrap(await client.api.GET('/v1/schedules')).schedules,
      row,
    },
    fail,
  );
}
