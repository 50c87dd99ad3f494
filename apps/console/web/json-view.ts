/**
 * A collapsible JSON viewer on `<details>` elements (keyboard and screen readers get them for
 * free). A blob stub (`{"$blob": "sha256:…", bytes, preview}`, a large output kept apart) shows
 * its size and preview, and a button that loads the output itself from `GET /v1/blobs/:hash` —
 * only when asked, since it can be megabytes.
 */
import { describeError, h, type Child } from './dom.js';

/** Loads a blob's content by its `$blob` name. */
export type BlobLoader = (hash: string) => Promise<unknown>;

interface BlobStub {
  readonly $blob: string;
  readonly bytes?: number;
  readonly preview?: string;
}

const isBlobStub = (v: unknown): v is BlobStub =>
  typeof v === 'object' && v !== null && typeof (v as { $blob?: unknown }).$blob === 'string';

/** Objects and arrays this deep or shallower start open. */
const OPEN_DEPTH = 1;

export function jsonView(value: unknown, loadBlob: BlobLoader, depth = 0): HTMLElement {
  if (isBlobStub(value)) return blobView(value, loadBlob, depth);
  if (value === null || typeof value !== 'object') {
    const kind = value === null ? 'null' : typeof value;
    return h('span', { class: `json-${kind}` }, JSON.stringify(value) ?? 'undefined');
  }
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [String(i), v])
    : Object.entries(value);
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  if (entries.length === 0) return h('span', { class: 'json-empty' }, `${open}${close}`);
  const label = Array.isArray(value) ? `${entries.length} items` : `${entries.length} keys`;
  return h(
    'details',
    { class: 'json', open: depth < OPEN_DEPTH },
    h('summary', {}, `${open} ${label} ${close}`),
    h(
      'ul',
      {},
      ...entries.map(([k, v]) =>
        h('li', {}, h('span', { class: 'json-key' }, `${k}: `), jsonView(v, loadBlob, depth + 1)),
      ),
    ),
  );
}

function blobView(stub: BlobStub, loadBlob: BlobLoader, depth: number): HTMLElement {
  const box = h('div', { class: 'blob', 'data-blob': stub.$blob });
  const button = h(
    'button',
    {
      type: 'button',
      'data-action': 'load-blob',
      onclick: () => {
        button.disabled = true;
        loadBlob(stub.$blob).then(
          (content) => box.replaceChildren(jsonView(content, loadBlob, depth)),
          (err: unknown) => {
            button.disabled = false;
            box.append(h('p', { class: 'error' }, describeError(err)));
          },
        );
      },
    },
    'Load',
  );
  const about: Child[] = [
    h('span', { class: 'muted' }, `blob ${stub.$blob.slice(0, 19)}…`),
    stub.bytes === undefined ? null : h('span', { class: 'muted' }, ` ${stub.bytes.toLocaleString()} bytes `),
    button,
  ];
  box.append(h('div', {}, ...about));
  if (stub.preview !== undefined) box.append(h('pre', { class: 'preview' }, stub.preview));
  return box;
}
