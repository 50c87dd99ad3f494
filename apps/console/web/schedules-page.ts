/**
 * `/console/schedules`: the tenant's schedules (`GET /v1/schedules`) — cadence, whether paused, the
 * next firing, the last firing's outcome and run, the firings counted by outcome — with buttons to
 * pause or resume one, run it now, and delete it, and a link to the runs it started (the runs list
 * searched by `scheduleId`).
 *
 * Like the runs list, the page asks again every few seconds: a firing happens in a worker, and
 * nothing streams a schedule's state.
 */
import { unwrap, type ScheduleView, type TetraloopClient } from '@tetraloop/client';
import { dataTable, describeError, h, show } from './dom.js';
import { polling } from './polling.js';
import { paths } from './routes.js';

const POLL_MS = 3000;
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

/** A date and time as the person's clock shows them (a schedule's next firing may be months away). */
const when = (iso: string | null): string => (iso ? new Date(iso).toLocaleString() : '—');

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
  const table = h('tbody');
  const notice = h('p', { class: 'notice', 'data-role': 'notice' });
  const list = h('section', { 'data-role': 'schedules', 'data-loaded': 'false' });
  show(list, dataTable({ class: 'runs' }, COLUMNS, table));
  show(root, h('main', { class: 'page', 'data-page': 'schedules' }, h('h1', {}, 'Schedules'), notice, list));

  /** An action's call, then the list again; what it did (or why not) in the notice. */
  const act = (what: string, call: () => Promise<string | undefined>) => (): void => {
    notice.textContent = `${what}…`;
    call().then(
      (said) => {
        notice.textContent = `${what}: ${said ?? 'done.'}`;
        void refresh();
      },
      (err: unknown) => {
        fail(err);
        notice.textContent = `${what}: ${describeError(err)}`;
      },
    );
  };

  const actions = (s: ScheduleView): HTMLDivElement => {
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
      h(
        'button',
        {
          type: 'button',
          class: 'danger',
          'data-action': 'delete',
          onclick: () => {
            // Irreversible, unlike the other buttons: the schedule goes, its runs stay.
            if (!confirm(`Delete the schedule “${s.name}”? Its runs stay.`)) return;
            act('Delete', async () => {
              unwrap(await client.api.DELETE('/v1/schedules/{id}', path));
              return undefined;
            })();
          },
        },
        'Delete',
      ),
    );
  };

  const row = (s: ScheduleView): HTMLTableRowElement =>
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
      h('td', {}, actions(s)),
    );

  const refresh = polling({
    everyMs: POLL_MS,
    shown: list,
    read: async () => unwrap(await client.api.GET('/v1/schedules')).schedules,
    draw: (schedules) => {
      table.replaceChildren(...schedules.map(row));
      if (schedules.length === 0)
        table.append(h('tr', {}, h('td', { colspan: COLUMNS.length, class: 'muted' }, 'No schedules.')));
      list.setAttribute('data-loaded', 'true');
    },
    failed: (err) => {
      fail(err);
      notice.textContent = describeError(err);
    },
  });
}
