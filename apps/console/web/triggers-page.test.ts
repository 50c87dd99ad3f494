import { describe, expect, it } from 'vitest';
import { filterText, groupingText } from './triggers-page.js';

describe('a trigger’s columns', () => {
  it('says its filter’s conditions, all of which must hold', () => {
    expect(filterText(undefined)).toBe('every event');
    expect(filterText({ path: 'payload.total', gte: 100 })).toBe('payload.total gte 100');
    expect(
      filterText([
        { path: 'payload.total', gte: 100 },
        { path: 'payload.kind', in: ['a', 'b'] },
      ]),
    ).toBe('payload.total gte 100 and payload.kind in ["a","b"]');
  });

  it('says how it groups events: debounce, batch, or each one', () => {
    expect(groupingText({ debounce: { key: '{{event.payload.customer}}', ms: 5000 } })).toBe(
      'debounce 5 s by {{event.payload.customer}}',
    );
    expect(groupingText({ batch: { maxSize: 100, maxWaitMs: 10_000 } })).toBe(
      'batch of up to 100 within 10 s',
    );
    expect(groupingText({})).toBe('each event');
  });
});
