/**
 * The items of a map node, in its details panel: its progress (from the run document), how its
 * wall time compares with its items' critical path (from the explain answer), and a page of its
 * items at a time, each read from `GET /v1/runs/:id/nodes/:nodeId/items/:index` — status, time,
 * error, and the output of the item a person clicks. The run document holds only the map's
 * output; every item's own state is there.
 *
 * The view outlives the panel's redraws (the panel is drawn again on every change of the run), so
 * the page a person turned to stays; it reads its page again when the map's counts change.
 */
import { unwrap, type NodeExplain, type NodeView, type TetraloopClient } from '@tetraloop/client';
import { dataTable, describeError, duration, h, show } from './dom.js';
import { jsonView, type BlobLoader } from './json-view.js';
import { itemsPage, mapProgressText, type MapProgress } from './map-progress.js';

export interface MapItemsView {
  readonly element: HTMLElement;
  /** Draws the map's latest counts and timing; reads the shown page again when the counts moved. */
  update(progress: MapProgress, timing: NodeExplain['map']): void;
}

type ItemView = NodeView & { readonly error?: { code: string; message: string }; readonly output?: unknown };

/** `code: message` of a failed item, or its output in one line, cut short. */
function summary(item: ItemView): string {
  if (item.error) return `${item.error.code}: ${item.error.message}`;
  if (!('output' in item)) return '—';
  const text = JSON.stringify(item.output) ?? 'null';
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

export function mapItemsView(
  client: TetraloopClient,
  runId: string,
  nodeId: string,
  loadBlob: BlobLoader,
): MapItemsView {
  const counts = h('p', { class: 'progress', 'data-role': 'map-progress' });
  const timingLine = h('p', { class: 'muted', 'data-role': 'map-timing' });
  const pager = h('div', { class: 'actions', 'data-role': 'items-pager' });
  const rows = h('tbody');
  const table = dataTable(
    { class: 'runs items', 'data-role': 'map-items' },
    ['#', 'status', 'took', 'output or error'],
    rows,
  );
  const chosen = h('div', { 'data-role': 'map-item' });
  const element = h(
    'section',
    { class: 'map-items', 'data-node-id': nodeId },
    h('h3', {}, 'Items'),
    counts,
    timingLine,
    pager,
    table,
    chosen,
  );
  let page = 0;
  let total = 0;
  let readFor = '';
  let selected: number | undefined;
  let reading = 0;

  async function readPage(): Promise<void> {
    const mine = ++reading;
    const { indices, page: at, lastPage } = itemsPage(total, page);
    page = at;
    table.setAttribute('data-loaded', 'false');
    drawPager(indices, lastPage);
    try {
      const items = await Promise.all(indices.map((index) => readItem(index)));
      if (mine !== reading) return;
      rows.replaceChildren(...items.map((item, i) => row(indices[i]!, item)));
      table.setAttribute('data-page', String(page));
      table.setAttribute('data-loaded', 'true');
    } catch (err) {
      if (mine === reading) show(chosen, h('p', { class: 'error' }, describeError(err)));
    }
  }

  const readItem = async (index: number): Promise<ItemView> =>
    unwrap(
      await client.api.GET('/v1/runs/{id}/nodes/{nodeId}/items/{index}', {
        params: { path: { id: runId, nodeId, index: String(index) } },
      }),
    );

  function drawPager(indices: readonly number[], lastPage: number): void {
    const turn = (to: number) => (): void => {
      page = to;
      void readPage();
    };
    show(
      pager,
      h(
        'button',
        { type: 'button', 'data-action': 'items-previous', disabled: page === 0, onclick: turn(page - 1) },
        'Previous',
      ),
      h(
        'span',
        { class: 'muted' },
        indices.length ? `items ${indices[0]}–${indices.at(-1)} of ${total}` : 'no items',
      ),
      h(
        'button',
        { type: 'button', 'data-action': 'items-next', disabled: page >= lastPage, onclick: turn(page + 1) },
        'Next',
      ),
    );
  }

  function row(index: number, item: ItemView): HTMLTableRowElement {
    const took = 'durationMs' in item ? item.durationMs : undefined;
    return h(
      'tr',
      {
        'data-item-index': index,
        'data-status': item.status,
        class: index === selected ? 'selected' : undefined,
        tabindex: 0,
        onclick: () => void choose(index),
      },
      h('td', {}, index),
      h('td', {}, h('span', { class: `badge status-${item.status}` }, item.status)),
      h('td', {}, duration(typeof took === 'number' ? took : undefined)),
      h('td', { class: item.error ? 'node-error' : 'muted' }, summary(item)),
    );
  }

  /** One item in full: its error, attempts and output (a blob loaded on demand). */
  async function choose(index: number): Promise<void> {
    selected = index;
    for (const tr of rows.querySelectorAll('tr')) {
      tr.classList.toggle('selected', tr.getAttribute('data-item-index') === String(index));
    }
    try {
      const item = await readItem(index);
      if (selected !== index) return;
      show(
        chosen,
        h(
          'div',
          { class: 'card', 'data-item-index': index, 'data-status': item.status },
          h('h3', {}, `Item ${index} `, h('span', { class: `badge status-${item.status}` }, item.status)),
          item.error
            ? h(
                'p',
                { class: 'node-error', 'data-role': 'node-error', 'data-error-class': item.error.code },
                h('strong', { class: 'error-class' }, item.error.code),
                ' ',
                h('span', { class: 'error-message' }, item.error.message),
              )
            : null,
          h('p', { class: 'muted' }, `${item.attempts.length} attempt(s)`),
          h(
            'div',
            { 'data-role': 'output' },
            'output' in item ? jsonView(item.output, loadBlob) : h('span', { class: 'muted' }, 'none yet'),
          ),
        ),
      );
    } catch (err) {
      show(chosen, h('p', { class: 'error' }, describeError(err)));
    }
  }

  return {
    element,
    update(progress, timing) {
      total = progress.total;
      show(
        counts,
        mapProgressText(progress),
        h('progress', { value: progress.done, max: Math.max(1, progress.total) }),
      );
      for (const [name, value] of Object.entries(progress))
        counts.setAttribute(`data-${name}`, String(value));
      show(
        timingLine,
        timing
          ? `${timing.ran} items ran, ${timing.concurrency} at once · items' critical path ${duration(timing.itemsCriticalPathMs)} (the longest lane) · wall ÷ path ${timing.wallOverItemsCriticalPath?.toFixed(2) ?? '—'} · longest item ${duration(timing.longestItemMs)}`
          : '',
      );
      const key = JSON.stringify(progress);
      if (key === readFor) return;
      readFor = key;
      void readPage();
    },
  };
}
