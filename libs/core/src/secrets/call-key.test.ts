import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { callIdempotencyKey } from './call-key.js';

describe('outbound Idempotency-Key', () => {
  const key = randomBytes(32);
  const call = { runId: '3f1c2b9e-0d4a-4a51-9a0e-7d4f3f8c2b11', nodeId: 'fetch', generation: 0, call: '0' };

  it('is the same for one call, and hex without the run id or the node', () => {
    const k = callIdempotencyKey(key, call);
    expect(callIdempotencyKey(key, { ...call })).toBe(k);
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    expect(k).not.toContain(call.runId);
    expect(k).not.toContain('fetch');
  });

  it('differs for every other call, generation, node, run or deployment', () => {
    const keys = [
      call,
      { ...call, call: '1' },
      { ...call, call: '1.0' },
      { ...call, call: '1.1' },
      { ...call, generation: 1 },
      { ...call, nodeId: 'other' },
      { ...call, runId: 'another' },
    ].map((c) => callIdempotencyKey(key, c));
    expect(new Set(keys).size).toBe(keys.length);
    expect(callIdempotencyKey(randomBytes(32), call)).not.toBe(keys[0]);
  });
});
