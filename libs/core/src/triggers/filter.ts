/**
 * A trigger's filter: conditions on an event's fields (`payload.total`, `key`, `name`…) that must
 * all hold for the trigger to fire. Pure: the schema and the one function that decides.
 */
import { z } from 'zod';
import type { StoredEvent } from '../domain/event.js';

/** The fields of an event a path may start from. */
export const EVENT_FIELDS = ['id', 'name', 'key', 'payload', 'receivedAt', 'source'] as const;

/** A dotted path into the event, from one of its fields: `payload.items.0.sku`. */
export const EventPath = z
  .string()
  .max(256)
  .regex(
    new RegExp(`^(${EVENT_FIELDS.join('|')})(\\.[^.\\s]+)*$`),
    `a path starts with one of ${EVENT_FIELDS.join(', ')}, then .field or .index steps`,
  );

const OPERATORS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'exists'] as const;
const Ordered = z.union([z.number(), z.string()]);

/**
 * One condition on the value at `path`; every operator it names must hold. `eq`, `ne` and `in`
 * compare JSON values whole; `gt`/`gte`/`lt`/`lte` compare numbers with numbers and strings with
 * strings (so ISO times order), and a value of another type fails them; `exists: true` holds for
 * any value, null included, `exists: false` when the path leads nowhere.
 */
export const FilterCondition = z
  .strictObject({
    path: EventPath,
    eq: z.unknown().optional(),
    ne: z.unknown().optional(),
    gt: Ordered.optional(),
    gte: Ordered.optional(),
    lt: Ordered.optional(),
    lte: Ordered.optional(),
    in: z.array(z.unknown()).min(1).max(1000).optional(),
    exists: z.boolean().optional(),
  })
  .refine((c) => OPERATORS.some((op) => op in c && c[op] !== undefined), {
    message: `name at least one operator: ${OPERATORS.join(', ')}`,
  });
export type FilterCondition = z.infer<typeof FilterCondition>;

/** A filter: one condition, or a list of them that must all hold. */
export const TriggerFilter = z.union([FilterCondition, z.array(FilterCondition).min(1).max(20)]);
export type TriggerFilter = z.infer<typeof TriggerFilter>;

/** Deep equality of JSON values (key order does not matter). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, i) => jsonEqual(item, other[i]));
  }
  const ak = Object.keys(a);
  const bk = Object.keys(b);
  return (
    ak.length === bk.length &&
    ak.every(
      (k) =>
        Object.prototype.hasOwnProperty.call(b, k) &&
        jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
    )
  );
}

/** `value` against `bound` by `cmp`, when both are numbers or both strings; false otherwise. */
function ordered(value: unknown, bound: number | string, cmp: (d: number) => boolean): boolean {
  if (typeof value === 'number' && typeof bound === 'number') return cmp(value - bound);
  if (typeof value === 'string' && typeof bound === 'string')
    return cmp(value < bound ? -1 : value > bound ? 1 : 0);
  return false;
}

/** Whether one condition holds for the value it names. */
export function conditionHolds(condition: FilterCondition, value: unknown): boolean {
  const c = condition;
  if (c.exists !== undefined && c.exists !== (value !== undefined)) return false;
  // A missing value equals nothing, is ordered against nothing and is in no list.
  if (c.eq !== undefined && !jsonEqual(value, c.eq)) return false;
  if (c.ne !== undefined && jsonEqual(value, c.ne)) return false;
  if (c.gt !== undefined && !ordered(value, c.gt, (d) => d > 0)) return false;
  if (c.gte !== undefined && !ordered(value, c.gte, (d) => d >= 0)) return false;
  if (c.lt !== undefined && !ordered(value, c.lt, (d) => d < 0)) return false;
  if (c.lte !== undefined && !ordered(value, c.lte, (d) => d <= 0)) return false;
  if (c.in !== undefined && !c.in.some((option) => jsonEqual(value, option))) return false;
  return true;
}

/**
 * The value at a dotted path (`undefined` where it leads nowhere). Own properties only: a sender's
 * payload must not reach `constructor` or `__proto__` through a path.
 */
export function valueAt(root: unknown, path: readonly string[]): unknown {
  let current = root;
  for (const step of path) {
    if (current === null || typeof current !== 'object') return undefined;
    if (!Object.prototype.hasOwnProperty.call(current, step)) return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

/** The value at a dotted event path. */
export const eventValue = (event: Partial<StoredEvent>, path: string): unknown =>
  valueAt(event, path.split('.'));

/** Whether an event passes a filter (no filter: every event does). */
export function filterMatches(filter: TriggerFilter | undefined, event: Partial<StoredEvent>): boolean {
  if (filter === undefined) return true;
  const conditions = Array.isArray(filter) ? filter : [filter];
  return conditions.every((c) => conditionHolds(c, eventValue(event, c.path)));
}
