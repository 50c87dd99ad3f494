import { describe, expect, it } from 'vitest';
import { conditionHolds } from './condition.js';

describe('conditionHolds', () => {
  const subject = { status: 'succeeded', output: { status: 200, body: { items: [1, 2], state: 'done' } } };

  it('checks each operator on the value at the path', () => {
    expect(conditionHolds({ path: 'output.status', equals: 200 }, subject)).toBe(true);
    expect(conditionHolds({ path: 'output.body.items', equals: [1, 2] }, subject)).toBe(true);
    expect(conditionHolds({ path: 'output.body.state', in: ['done', 'failed'] }, subject)).toBe(true);
    expect(conditionHolds({ path: 'output.body.next', exists: false }, subject)).toBe(true);
    expect(conditionHolds({ path: 'output.body.state', exists: true }, subject)).toBe(true);
    expect(conditionHolds({ path: 'output.status', gte: 200 }, subject)).toBe(true);
    expect(conditionHolds({ path: 'output.status', lte: 199 }, subject)).toBe(false);
  });

  it('treats a non-number as failing a comparison', () => {
    expect(conditionHolds({ path: 'output.body.state', gte: 1 }, subject)).toBe(false);
  });
});
