import { describe, expect, it } from 'vitest';
import { FilterCondition, TriggerFilter, filterMatches, jsonEqual } from './filter.js';

const event = {
  id: 'e1',
  name: 'order.created',
  key: 'c1',
  receivedAt: '2026-12-02T10:00:00.000Z',
  payload: { total: 120, customer: 'ada', tags: ['vip'], note: null, items: [{ sku: 'A' }] },
};
const holds = (filter: unknown): boolean => filterMatches(TriggerFilter.parse(filter), event);

describe('trigger filters', () => {
  it('compares numbers and strings with gt, gte, lt, lte, and refuses other types', () => {
    expect(holds({ path: 'payload.total', gte: 100 })).toBe(true);
    expect(holds({ path: 'payload.total', gte: 120 })).toBe(true);
    expect(holds({ path: 'payload.total', gt: 120 })).toBe(false);
    expect(holds({ path: 'payload.total', lt: 200, gt: 100 })).toBe(true);
    expect(holds({ path: 'payload.total', lte: 119 })).toBe(false);
    expect(holds({ path: 'receivedAt', gte: '2026-12-01' })).toBe(true);
    expect(holds({ path: 'payload.customer', gt: 1 })).toBe(false);
    expect(holds({ path: 'payload.missing', lt: 1 })).toBe(false);
  });

  it('compares JSON values whole with eq, ne and in', () => {
    expect(holds({ path: 'payload.customer', eq: 'ada' })).toBe(true);
    expect(holds({ path: 'payload.tags', eq: ['vip'] })).toBe(true);
    expect(holds({ path: 'payload.items.0', eq: { sku: 'A' } })).toBe(true);
    expect(holds({ path: 'payload.customer', ne: 'ada' })).toBe(false);
    expect(holds({ path: 'payload.missing', ne: 'ada' })).toBe(true);
    expect(holds({ path: 'key', in: ['c0', 'c1'] })).toBe(true);
    expect(holds({ path: 'key', in: ['c2'] })).toBe(false);
    expect(jsonEqual({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 })).toBe(true);
    expect(jsonEqual([1], { 0: 1 })).toBe(false);
  });

  it('says whether a path leads somewhere with exists (null is a value)', () => {
    expect(holds({ path: 'payload.note', exists: true })).toBe(true);
    expect(holds({ path: 'payload.nothing', exists: false })).toBe(true);
    expect(holds({ path: 'payload.customer', exists: false })).toBe(false);
    // A payload's prototype is not a path.
    expect(holds({ path: 'payload.constructor', exists: true })).toBe(false);
    expect(holds({ path: 'payload.__proto__', exists: true })).toBe(false);
  });

  it('holds when every condition of a list holds, and with no filter at all', () => {
    expect(
      holds([
        { path: 'name', eq: 'order.created' },
        { path: 'payload.total', gte: 100 },
      ]),
    ).toBe(true);
    expect(
      holds([
        { path: 'name', eq: 'order.created' },
        { path: 'payload.total', gte: 500 },
      ]),
    ).toBe(false);
    expect(filterMatches(undefined, event)).toBe(true);
  });

  it('refuses a condition without an operator, an unknown operator or a path outside the event', () => {
    expect(FilterCondition.safeParse({ path: 'payload.total' }).success).toBe(false);
    expect(FilterCondition.safeParse({ path: 'payload.total', near: 1 }).success).toBe(false);
    const outside = FilterCondition.safeParse({ path: 'input.total', eq: 1 });
    expect(outside.error?.issues[0]?.path).toEqual(['path']);
  });
});
