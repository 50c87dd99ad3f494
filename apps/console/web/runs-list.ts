/**
 * `/console/`: the tenant's runs from the runs search (`GET /v1/runs`) with its filters, and a
 * box to submit a run. The filters live in the page's query string, so a filtered list can be
 * reloaded or bookmarked (it holds no key).
 *
 * Live status: the search is asked again every few seconds. A list follows many runs, most of
 * them settled, and learns of new ones only by searching: one indexed read per poll costs the API
 * less than an event stream per listed run (each stream is a held connection under the tenant's
 * stream cap), and it shows runs the page did not know of.
 */
import type { RunListing, RunSearch, RunStatus, TetraloopClient } from '@tetraloop/client';
import { clock, dataTable, describeError, duration, form, h, show, type Child } from './dom.js';
import { polling } from './polling.js';
import { paths } from './routes.js';

const POLL_MS = 3000;
const STATUSES: readonly RunStatus[] = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out'];
/** The filters the page offers, as the search names them. */
const FILTERS = ['status', 'agentId', 'sessionKey', 'tag', 'scheduleId', 'triggerId', 'since'] as const;
type Filter = (typeof FILTERS)[number];

function searchOf(query: URLSearchParams): RunSearch {
  const search: Record<string, string> = {};
  for (const name of FILTERS) {
    const value = query.get(name)?.trim();
    if (value) search[name] = value;
  }
  return { ...(search as RunSearch), limit: 50 };
}

export function runsPage(root: HTMLElement, client: TetraloopClient, fail: (err: unknown) => void): void {
  const query = new URLSearchParams(location.search);
  const field = (name: Filter, placeholder: string): HTMLInputElement =>
    h('input', { name, placeholder, value: query.get(name) ?? '', 'aria-label': placeholder });
  const status = h(
    'select',
    { name: 'status', 'aria-label': 'status' },
    h('option', { value: '' }, 'any status'),
    ...STATUSES.map((s) => h('option', { value: s, selected: query.get('status') === s }, s)),
  );
  const filters = form(
    {
      class: 'filters',
      'data-role': 'filters',
    },
    () => {
      const next = new URLSearchParams();
      for (const el of filters.querySelectorAll<HTMLInputElement | HTMLSelectElement>('[name]')) {
        if (el.value.trim()) next.set(el.name, el.value.trim());
      }
      history.replaceState(null, '', `${location.pathname}${next.size ? `?${next}` : ''}`);
      void refresh();
    },
    status,
    field('agentId', 'agent'),
    field('sessionKey', 'session'),
    field('tag', 'tag'),
    field('scheduleId', 'schedule'),
    field('triggerId', 'trigger'),
    field('since', 'since (15m, 1h, ISO)'),
    h('button', { type: 'submit' }, 'Search'),
  );
  status.addEventListener('change', () => filters.requestSubmit());

  const table = h('tbody');
  const notice = h('p', { class: 'notice', 'data-role': 'notice' });
  const list = h('section', { 'data-role': 'runs', 'data-loaded': 'false' });
  show(
    list,
    dataTable(
      { class: 'runs' },
      ['run', 'status', 'agent', 'session', 'started by', 'task', 'tags', 'created', 'took', 'nodes'],
      table,
    ),
  );
  show(
    root,
    h(
      'main',
      { class: 'page', 'data-page': 'runs' },
      h('h1', {}, 'Runs'),
      submitBox(client),
      filters,
      notice,
      list,
    ),
  );

  const refresh = polling({
    everyMs: POLL_MS,
    shown: list,
    read: () => client.list(searchOf(new URLSearchParams(location.search))),
    draw: (page) => {
      table.replaceChildren(...page.runs.map(row));
      if (page.runs.length === 0)
        table.append(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'No runs.')));
      list.setAttribute('data-loaded', 'true');
      notice.textContent = '';
    },
    failed: (err) => {
      fail(err);
      notice.textContent = describeError(err);
    },
  });
}

function row(run: RunListing): HTMLTableRowElement {
  return h(
    'tr',
    { 'data-run-id': run.runId, 'data-status': run.status },
    h('td', {}, h('a', { href: paths.run(run.runId) }, run.runId.slice(0, 8)), run.rerunOf ? ' ↻' : ''),
    h('td', {}, h('span', { class: `badge status-${run.status}` }, run.status)),
    h('td', {}, h('a', { href: paths.lessons(run.agentId) }, run.agentId)),
    h('td', {}, run.sessionKey ? h('a', { href: paths.session(run.sessionKey) }, run.sessionKey) : '—'),
    h('td', { 'data-role': 'started-by' }, startedBy(run)),
    h('td', { class: 'task' }, run.task ?? 'graph'),
    h('td', {}, run.tags.join(', ')),
    h('td', {}, clock(run.createdAt)),
    h('td', {}, duration(run.durationMs)),
    h(
      'td',
      {},
      `${run.nodes.succeeded}/${run.nodes.total}${run.nodes.failed ? ` (${run.nodes.failed} failed)` : ''}`,
    ),
  );
}

/** What started a run that no call did: its schedule (its runs, searched) or its trigger. */
function startedBy(run: RunListing): Child {
  if (run.scheduleId) return h('a', { href: paths.scheduleRuns(run.scheduleId) }, run.scheduleId);
  return run.triggerId ? `trigger ${run.triggerId}` : '—';
}

/** A run request as JSON (a graph, or a task), submitted as it is; then its page. */
function submitBox(client: TetraloopClient): HTMLElement {
  const text = h('textarea', {
    name: 'request',
    rows: 6,
    spellcheck: false,
    placeholder: '{"graph": {"nodes": [...], "edges": [...]}}  or  {"task": "..."}',
    'aria-label': 'run request',
  });
  const error = h('p', { class: 'error', 'data-role': 'submit-error' });
  return h(
    'details',
    { class: 'card submit' },
    h('summary', {}, 'Submit a run'),
    form(
      {
        'data-role': 'submit-run',
      },
      () => {
        error.textContent = '';
        let request: unknown;
        try {
          request = JSON.parse(text.value);
        } catch (err) {
          error.textContent = `not JSON: ${describeError(err)}`;
          return;
        }
        client.submit(request as Parameters<TetraloopClient['submit']>[0]).then(
          ({ runId }) => location.assign(paths.run(runId)),
          (err: unknown) => (error.textContent = describeError(err)),
        );
      },
      text,
      h('button', { type: 'submit' }, 'Submit'),
      error,
    ),
  );
}
