/**
 * The rules of money budgets, pure: whether a model call fits the run's budget (`budget.costUsd`)
 * and its tenant's daily cap, what a spent budget does (`onBudget`), what a budget decision's
 * signal means, and what a raise becomes under the deployment's ceiling. The harness applies them
 * (`executor/model-cost.ts`); the counting is in Redis.
 */
import type { BudgetDecision, OnBudget } from '../domain/run-model.js';
import type { NodeErrorData } from '../errors/node-error.js';
import { nanoFromUsd, usdFromNano } from './price-table.js';

/** Dollars as people read them in messages: cents, or more digits for amounts under a cent. */
export const formatUsd = (usd: number): string =>
  `$${usd >= 0.01 || usd === 0 ? usd.toFixed(2) : usd.toPrecision(2)}`;

/** What a model call does about the run's money budget. */
export type RunCostCheck =
  | { readonly kind: 'within' }
  | { readonly kind: 'fail'; readonly error: NodeErrorData }
  | { readonly kind: 'pause'; readonly limitNano: number; readonly spentNano: number };

/**
 * Before a model call: within the run's budget while what it spent (nano-dollars, priced calls
 * only) is below `limitUsd`; otherwise fail, or pause when the run asked for it.
 */
export function checkRunCost(
  limitUsd: number | undefined,
  spentNano: number,
  onBudget: OnBudget,
): RunCostCheck {
  if (limitUsd === undefined) return { kind: 'within' };
  const limitNano = nanoFromUsd(limitUsd);
  if (spentNano < limitNano) return { kind: 'within' };
  if (onBudget === 'pause') return { kind: 'pause', limitNano, spentNano };
  return { kind: 'fail', error: costSpentError(limitUsd, spentNano) };
}

export const costSpentError = (limitUsd: number, spentNano: number, why = ''): NodeErrorData => ({
  code: 'budget_exhausted',
  message: `the run spent ${formatUsd(usdFromNano(spentNano))} of its ${formatUsd(limitUsd)} budget${why}`,
  budget: 'costUsd',
});

/** Before a model call: the tenant's spending today (UTC, nano-dollars) has reached its daily cap. */
export function checkDailyCap(
  tenant: string,
  capUsd: number | undefined,
  spentTodayNano: number,
): NodeErrorData | undefined {
  if (capUsd === undefined || spentTodayNano < nanoFromUsd(capUsd)) return undefined;
  return {
    code: 'budget_exhausted',
    message: `tenant "${tenant}" spent ${formatUsd(usdFromNano(spentTodayNano))} on models today (UTC), its daily cap is ${formatUsd(capUsd)}`,
    budget: 'dailyCostUsd',
  };
}

/**
 * Names one pause of a run at one budget: every model call of the generation that finds the same
 * budget spent waits for the same decision (one nonce, one signal), and a raise that is still
 * spent pauses anew under the new budget.
 */
export const budgetWaitKey = (generation: number, limitNano: number): string =>
  `budget#g${generation}#${limitNano}`;

/**
 * The budget a raise gives the run: `requested` held to the deployment's ceiling, or undefined
 * when that is not above the run's budget now (a decision that would lower it, or keep it).
 */
export function raisedBudget(
  currentUsd: number | undefined,
  requested: number,
  ceilingUsd: number | undefined,
): number | undefined {
  const allowed = ceilingUsd === undefined ? requested : Math.min(requested, ceilingUsd);
  if (currentUsd !== undefined && nanoFromUsd(allowed) <= nanoFromUsd(currentUsd)) return undefined;
  return allowed;
}

/** Whether a delivered budget decision raised the budget (the raise itself is applied on delivery). */
export const decisionRaises = (decision: BudgetDecision): boolean => decision.costUsd !== undefined;
