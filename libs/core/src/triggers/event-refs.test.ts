import { describe, expect, it } from 'vitest';
import { hasEventRefs, renderKey, resolveEventRefs } from './event-refs.js';

const first = {
  id: 'e1',
  name: 'order.created',
  key: 'c1',
  receivedAt: 't1',
  payload: { customer: 'ada', n: 1 },
};
const last = {
  id: 'e2',
  name: 'order.created',
  key: 'c1',
  receivedAt: 't2',
  payload: { customer: 'bob', n: 2 },
};
const scope = { event: last, events: [first, last] };

describe('event references in a trigger’s run input', () => {
  it('fills in whole values, text, the batch’s list, and null where a path leads nowhere', () => {
    const input = {
      customer: { $ref: 'event.payload.customer' },
      line: 'order {{event.id}} for {{event.payload.customer}}',
      all: { $ref: 'events' },
      firstId: { $ref: 'events.0.id' },
      missing: { $ref: 'event.payload.nothing' },
      nested: [{ n: { $ref: 'event.payload.n' } }],
    };
    expect(resolveEventRefs(input, scope)).toEqual({
      customer: 'bob',
      line: 'order e2 for bob',
      all: [first, last],
      firstId: 'e1',
      missing: null,
      nested: [{ n: 2 }],
    });
  });

  it('leaves references to anything else as they are', () => {
    const input = { a: { $ref: 'input.x' }, b: '{{node.output}}', c: 3 };
    expect(resolveEventRefs(input, scope)).toEqual(input);
    expect(hasEventRefs(input)).toBe(false);
    expect(hasEventRefs({ a: ['{{ event.key }}'] })).toBe(true);
    expect(hasEventRefs(undefined)).toBe(false);
  });

  it('renders a debounce or batch key per event', () => {
    expect(renderKey('{{event.payload.customer}}', { ...last, seq: 2 })).toBe('bob');
    expect(renderKey('c-{{event.key}}', { ...first, seq: 1 })).toBe('c-c1');
    expect(renderKey(undefined, { ...first, seq: 1 })).toBe('');
  });
});
