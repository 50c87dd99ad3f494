import { describe, expect, it } from 'vitest';
import { childBudget } from './loop.js';

describe('childBudget', () => {
  it("is what is left of the parent's budget, field by field", () => {
    expect(
      childBudget(
        { toolCalls: 10, toolTimeMs: 1000, tokens: 500 },
        { toolCalls: 4, toolTimeMs: 250, tokens: 450, costNanoUsd: 0 },
      ),
    ).toEqual({ toolCalls: 6, toolTimeMs: 750, tokens: 50 });
  });

  it('leaves a child what is left of the money budget, counted in nano-dollars', () => {
    // 0.3 - 0.1 is 0.19999999999999998 in dollars; in nano-dollars it is 200,000,000 exactly.
    expect(
      childBudget({ costUsd: 0.3 }, { toolCalls: 0, toolTimeMs: 0, tokens: 0, costNanoUsd: 100_000_000 }),
    ).toEqual({ costUsd: 0.2 });
  });

  it('leaves out what the parent does not limit, and goes to zero or below once spent', () => {
    expect(
      childBudget({ tokens: 100 }, { toolCalls: 3, toolTimeMs: 9, tokens: 120, costNanoUsd: 5 }),
    ).toEqual({
      tokens: -20,
    });
  });
});
