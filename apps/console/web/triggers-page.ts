/**
 * `/console/triggers`: the tenant's triggers (`GET /v1/triggers`) — the event each listens for, its
 * filter, its debounce or batch, when it was made — with a Delete button and a link to the runs it
 * started (the runs list searched by `triggerId`). A `list-page.ts` like the schedules page: read
 * again every few seconds, since events are matched in a worker and nothing streams a trigger's
 * state.
 */
import { unwrap, type TetraloopClient, type Trigger } from '@tetraloop/client';
import { h } from './dom.js';
import { deleteButton, listPage, when, type Act } from './list-page.js';
import { paths } from './routes.js';

const COLUMNS = ['trigger', 'event', 'filter', 'debounce or batch', 'created', 'runs', ''];

type Condition = Extract<NonNullable<Trigger['filter']>, { path: string }>;

/** `payload.total gte 100`: each test a condition makes, after its path. */
const condition = (c: Condition): string =>
  [
    c.path,
    ...Object.entries(c)
      .filter(([op]) => op !== 'path')
      .map(([op, value]) => `${op} ${JSON.stringify(value)}`),
  ].join(' ');

/** The filter's conditions, all of which must hold: `payload.total gte 100 and payload.kind eq "a"`. */
export function filterText(filter: Trigger['filter']): string {
  if (filter === undefined) return 'every event';
  return (Array.isArray(filter) ? filter : [filter]).map(condition).join(' and ');
}

/** `debounce 5 s by {{event.payload.customer}}`, `batch of up to 100 within 10 s`, or `each event`. */
export function groupingText(t: Pick<Trigger, 'debounce' | 'batch'>): string {
  const by = (key: string | undefined): string => (key ? ` by ${key}` : '');
  if (t.debounce) return `debounce ${t.debounce.ms / 1000} s${by(t.debounce.key)}`;
  if (t.batch)
    return `batch of up to ${t.batch.maxSize} within ${t.batch.maxWaitMs / 1000} s${by(t.batch.key)}`;
  return 'each event';
}

export function triggersPage(root: HTMLElement, client: TetraloopClient, fail: (err: unknown) => void): void {
  const row = (t: Trigger, act: Act): HTMLTableRowElement =>
    h(
      'tr',
      { 'data-trigger-id': t.id, 'data-event': t.event },
      h('td', {}, t.description ?? '', t.description ? h('br') : null, h('code', { class: 'muted' }, t.id)),
      h('td', {}, h('code', {}, t.event)),
      h('td', { 'data-role': 'filter' }, filterText(t.filter)),
      h('td', { 'data-role': 'grouping' }, groupingText(t)),
      h('td', {}, when(t.createdAt)),
      h('td', {}, h('a', { href: paths.triggerRuns(t.id), 'data-role': 'trigger-runs' }, 'runs')),
      h(
        'td',
        {},
        h(
          'div',
          { class: 'actions' },
          deleteButton(act, `Delete the trigger on “${t.event}”? Its runs stay.`, async () => {
            unwrap(await client.api.DELETE('/v1/triggers/{id}', { params: { path: { id: t.id } } }));
          }),
        ),
      ),
    );

  listPage(
    root,
    {
      page: 'triggers',
      title: 'Triggers',
      role: 'triggers',
      columns: COLUMNS,
      empty: 'No triggers.',
      read: async () => unwrap(await client.api.GET('/v1/triggers')).triggers,
      row,
    },
    fail,
  );
}
