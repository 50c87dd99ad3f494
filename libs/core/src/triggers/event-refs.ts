/**
 * What a trigger's run request and keys read of the events that fire it: `{"$ref": "event.payload.customer"}`
 * (a whole value) and `"…{{event.key}}…"` (inside a string) in the run's `input`, and in a
 * debounce or batch `key`. `event` is the last event a firing consumed, `events` all of them,
 * oldest first. References to anything else are left as they are. Pure.
 */
import type { StoredEvent } from '../domain/event.js';
import { isRefObject } from '../graph/references.js';
import { valueAt } from './filter.js';

/** The roots a trigger's references may read. */
export const EVENT_ROOTS = ['event', 'events'] as const;

const TEMPLATE = /\{\{\s*([^{}\s]+)\s*\}\}/g;

/** What an event looks like to a reference: its fields, without its internal order. */
export type EventView = Omit<StoredEvent, 'seq'>;

export const eventView = ({ seq: _seq, ...view }: StoredEvent): EventView => view;

export interface EventScope {
  readonly event: EventView;
  readonly events: readonly EventView[];
}

const rootOf = (expr: string): string => expr.split('.', 1)[0] ?? '';
const isEventExpr = (expr: string): boolean => (EVENT_ROOTS as readonly string[]).includes(rootOf(expr));

function lookup(scope: EventScope, expr: string): unknown {
  const [root = '', ...path] = expr.split('.');
  return valueAt(root === 'event' ? scope.event : scope.events, path);
}

const text = (value: unknown): string =>
  value === undefined || value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value);

/**
 * `value` with every event reference replaced: a `$ref` by the value (null where the path leads
 * nowhere, so the input stays JSON), a `{{…}}` by its text (`""` for nothing).
 */
export function resolveEventRefs(value: unknown, scope: EventScope): unknown {
  if (isRefObject(value)) {
    return isEventExpr(value.$ref) ? (lookup(scope, value.$ref) ?? null) : value;
  }
  if (typeof value === 'string') {
    return value.replace(TEMPLATE, (whole, expr: string) =>
      isEventExpr(expr) ? text(lookup(scope, expr)) : whole,
    );
  }
  if (Array.isArray(value)) return value.map((item) => resolveEventRefs(item, scope));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveEventRefs(v, scope)]));
  }
  return value;
}

/** Whether `value` holds any event reference (its run's input is known only when it fires). */
export function hasEventRefs(value: unknown): boolean {
  if (isRefObject(value)) return isEventExpr(value.$ref);
  if (typeof value === 'string') return [...value.matchAll(TEMPLATE)].some((m) => isEventExpr(m[1] ?? ''));
  if (Array.isArray(value)) return value.some(hasEventRefs);
  if (typeof value === 'object' && value !== null) return Object.values(value).some(hasEventRefs);
  return false;
}

/** A debounce or batch key for one event: its template with `{{event.…}}` filled in. */
export const renderKey = (template: string | undefined, event: StoredEvent): string =>
  template === undefined
    ? ''
    : (resolveEventRefs(template, { event: eventView(event), events: [] }) as string);
