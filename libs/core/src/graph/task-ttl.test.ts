import { describe, expect, it } from 'vitest';
import { expiryOf, fallbackNode } from './task-ttl.js';

describe('task TTLs', () => {
  it('expire a node not started within ttlMs of being queued, skipping by default', () => {
    const node = { id: 'a', ttlMs: 1000 };
    expect(expiryOf(node, 5000, 5999)).toBeUndefined();
    expect(expiryOf(node, 5000, 6000)).toEqual({ at: 6000, onExpire: 'skip' });
    expect(expiryOf({ id: 'b' }, 0, Number.MAX_SAFE_INTEGER)).toBeUndefined();
  });

  it('expire at an absolute time, with the declared policy', () => {
    const node = { id: 'a', expiresAt: '2026-12-01T06:00:00Z', onExpire: 'fail' as const };
    expect(expiryOf(node, 0, Date.parse('2026-12-01T05:59:59Z'))).toBeUndefined();
    expect(expiryOf(node, 0, Date.parse('2026-12-01T06:00:00Z'))).toEqual({
      at: Date.parse('2026-12-01T06:00:00Z'),
      onExpire: 'fail',
    });
  });

  it('put the fallback in the node’s place, under its id', () => {
    const node = {
      id: 'summary',
      kind: 'llm',
      prompt: 'long',
      ttlMs: 1,
      onExpire: 'downgrade' as const,
      fallback: { kind: 'tool', tool: 'json', args: { value: 'short' } },
    };
    expect(fallbackNode(node)).toEqual({
      id: 'summary',
      kind: 'tool',
      tool: 'json',
      args: { value: 'short' },
    });
  });
});
