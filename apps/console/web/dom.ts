/**
 * The console's whole view layer: elements built from a tag, attributes and children. Attributes
 * are set with `setAttribute` and listeners with `addEventListener` — never inline `style` or
 * `on…` markup, which the page's Content-Security-Policy would refuse.
 */

export type Child = Node | string | number | null | undefined | false;
/** Attribute values; `undefined` and `false` leave the attribute out. Functions under `on…` are listeners. */
export type Attrs = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

function fill<E extends Element>(el: E, attrs: Attrs, children: Child[]): E {
  for (const [name, value] of Object.entries(attrs)) {
    if (typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, '');
    else if (value !== undefined && value !== false) el.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'number' ? String(child) : child);
  }
  return el;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  return fill(document.createElement(tag), attrs, children);
}

const SVG_NS = 'http://www.w3.org/2000/svg';

export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): SVGElementTagNameMap[K] {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replaces an element's children. */
export function show(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  fill(el, {}, children);
}

/** A time as the person's clock shows it; `—` for none. */
export function clock(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleTimeString() : '—';
}

/** A duration in ms, short: `840 ms`, `3.2 s`, `4 min 5 s`; `—` for none. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Why a call failed, for a person: the API's code and message when it sent one. */
export function describeError(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A form whose submission stays in the page: `submit` runs instead of a navigation (which the
 * page's `form-action 'none'` would refuse anyway).
 */
export function form(attrs: Attrs, submit: () => void, ...children: Child[]): HTMLFormElement {
  const onsubmit = (event: Event): void => {
    event.preventDefault();
    submit();
  };
  return h('form', { ...attrs, onsubmit }, ...children);
}

/** A table: a header row naming `columns`, over `body`. */
export function dataTable(
  attrs: Attrs,
  columns: readonly string[],
  body: HTMLTableSectionElement,
): HTMLTableElement {
  return h('table', attrs, h('thead', {}, h('tr', {}, ...columns.map((c) => h('th', {}, c)))), body);
}
