/**
 * What the console's pages of a tenant's registered things (schedules, triggers) share: a title,
 * a notice line, a table of one row per thing read again every few seconds (`polling.ts`: a
 * firing or a matching event happens in a worker, and nothing streams their state), a row's
 * action buttons that report in the notice and read the list again, and a Delete button that asks
 * first. Each page brings its columns and rows.
 */
import { dataTable, describeError, h, show } from './dom.js';
import { polling } from './polling.js';

const POLL_MS = 3000;

/** An action's call, then the list again; what it did (or why not) in the notice. */
export type Act = (what: string, call: () => Promise<string | undefined>) => () => void;

export interface ListPage<T> {
  /** `data-page` of the page's root, and its heading. */
  readonly page: string;
  readonly title: string;
  /** `data-role` of the list (it gets `data-loaded="true"` once drawn). */
  readonly role: string;
  readonly columns: readonly string[];
  /** The row that says the list is empty. */
  readonly empty: string;
  readonly read: () => Promise<readonly T[]>;
  readonly row: (item: T, act: Act) => HTMLTableRowElement;
}

export function listPage<T>(root: HTMLElement, spec: ListPage<T>, fail: (err: unknown) => void): void {
  const table = h('tbody');
  const notice = h('p', { class: 'notice', 'data-role': 'notice' });
  const list = h('section', { 'data-role': spec.role, 'data-loaded': 'false' });
  show(list, dataTable({ class: 'runs' }, spec.columns, table));
  show(root, h('main', { class: 'page', 'data-page': spec.page }, h('h1', {}, spec.title), notice, list));

  const act: Act = (what, call) => (): void => {
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

  const refresh = polling({
    everyMs: POLL_MS,
    shown: list,
    read: spec.read,
    draw: (items) => {
      table.replaceChildren(...items.map((item) => spec.row(item, act)));
      if (items.length === 0)
        table.append(h('tr', {}, h('td', { colspan: spec.columns.length, class: 'muted' }, spec.empty)));
      list.setAttribute('data-loaded', 'true');
    },
    failed: (err) => {
      fail(err);
      notice.textContent = describeError(err);
    },
  });
}

/** A Delete button that asks first (it cannot be undone, unlike the other buttons), then deletes. */
export function deleteButton(act: Act, question: string, remove: () => Promise<void>): HTMLButtonElement {
  return h(
    'button',
    {
      type: 'button',
      class: 'danger',
      'data-action': 'delete',
      onclick: () => {
        if (!confirm(question)) return;
        act('Delete', async () => {
          await remove();
          return undefined;
        })();
      },
    },
    'Delete',
  );
}

/** A date and time as the person's clock shows them (a schedule's next firing may be months away). */
export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : '—');
