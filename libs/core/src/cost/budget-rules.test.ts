import { describe, expect, it } from 'vitest';
import { budgetWaitKey, checkDailyCap, checkRunCost, formatUsd, raisedBudget } from './budget-rules.js';

describe('money budgets', () => {
  it('let a call through under the budget, and fail or pause it once the budget is spent', () => {
    expect(checkRunCost(undefined, 10 ** 12, 'fail')).toEqual({ kind: 'within' });
    expect(checkRunCost(0.01, 9_999_999, 'fail')).toEqual({ kind: 'within' });
    expect(checkRunCost(0.01, 10_000_000, 'fail')).toMatchObject({
      kind: 'fail',
      error: {
        code: 'budget_exhausted',
        budget: 'costUsd',
        message: 'the run spent $0.01 of its $0.01 budget',
      },
    });
    expect(checkRunCost(0.01, 12_000_000, 'pause')).toEqual({
      kind: 'pause',
      limitNano: 10_000_000,
      spentNano: 12_000_000,
    });
  });

  it("stop a tenant's calls at its daily cap", () => {
    expect(checkDailyCap('acme', undefined, 10 ** 15)).toBeUndefined();
    expect(checkDailyCap('acme', 5, 4_999_999_999)).toBeUndefined();
    expect(checkDailyCap('acme', 5, 5_000_000_000)).toMatchObject({
      code: 'budget_exhausted',
      budget: 'dailyCostUsd',
      message: 'tenant "acme" spent $5.00 on models today (UTC), its daily cap is $5.00',
    });
  });

  it('raise a budget only upwards, and only as far as the ceiling', () => {
    expect(raisedBudget(0.5, 2, undefined)).toBe(2);
    expect(raisedBudget(0.5, 2, 1)).toBe(1);
    expect(raisedBudget(0.5, 0.5, undefined)).toBeUndefined();
    expect(raisedBudget(0.5, 0.25, undefined)).toBeUndefined();
    expect(raisedBudget(1, 2, 1)).toBeUndefined();
  });

  it('name one pause per generation and budget, and print amounts', () => {
    expect(budgetWaitKey(2, 10_000_000)).toBe('budget#g2#10000000');
    expect(formatUsd(12.5)).toBe('$12.50');
    expect(formatUsd(0.000123)).toBe('$0.00012');
    expect(formatUsd(0)).toBe('$0.00');
  });
});
