/**
 * Money around model calls. Before a call: the tenant's daily cap, then the run's money budget —
 * spent, the call fails `budget_exhausted`, or with `onBudget: "pause"` the node parks (holding no
 * worker) until a budget decision raises the budget or stops it. After a call: its price, the
 * tenant's daily ledger and the cost metric. The rules are `cost/`'s; this is where they meet the
 * run, the ledger and the queue.
 */
import { randomBytes } from 'node:crypto';
import {
  budgetWaitKey,
  checkDailyCap,
  checkRunCost,
  costSpentError,
  decisionRaises,
} from '../cost/budget-rules.js';
import { costDay, costOf, nanoFromUsd, usdFromNano, type PricedUsage } from '../cost/price-table.js';
import { BUDGET_SIGNAL_PREFIX, BudgetDecision, type UsageCharge } from '../domain/run-model.js';
import { unscopeName } from '../domain/tenant.js';
import { DEFAULT_BUDGET_DECISION_TIMEOUT_SECONDS } from '../domain/wait-limits.js';
import type { NodeErrorData } from '../errors/node-error.js';
import { observeModelCost } from '../telemetry/metrics.js';
import type { ExecutorDeps } from './deps.js';
import { awaitSignal, type NodeContext } from './node-context.js';

/** Whose calls these are: what the ledger books them under. */
export interface CostOwner {
  readonly tenant: string;
  readonly agentId: string;
  /** A session run's session as stored (tenant-scoped). */
  readonly sessionKey: string | null;
}

/**
 * Undefined when a model call may go out now; else why not. `spentNano` is what the run's priced
 * calls cost so far, as the node read it. A pause parks the job (throws DelayedError) and the
 * call is looked at again when the job comes back.
 */
export async function costGate(ctx: NodeContext, spentNano: number): Promise<NodeErrorData | undefined> {
  const { plan } = ctx;
  const capped = await dailyCapReached(ctx.deps, plan.tenant);
  if (capped) return capped;
  let limitUsd = ctx.begin.budget.costUsd;
  for (;;) {
    const check = checkRunCost(limitUsd, spentNano, plan.onBudget);
    if (check.kind === 'within') return undefined;
    if (check.kind === 'fail') return check.error;
    const pausedAt = usdFromNano(check.limitNano);
    const answer = await awaitSignal(
      ctx,
      {
        key: budgetWaitKey(ctx.generation, check.limitNano),
        signal: BUDGET_SIGNAL_PREFIX,
        nonce: randomBytes(12).toString('hex'),
        budget: { costUsd: pausedAt, spentUsd: usdFromNano(spentNano) },
      },
      // Never past the run's deadline either (awaitSignal).
      ctx.deps.budgetDecisionTimeoutSeconds ?? DEFAULT_BUDGET_DECISION_TIMEOUT_SECONDS,
    );
    if (!answer.delivered) {
      return costSpentError(pausedAt, spentNano, `; no budget decision (${answer.signal}) in time`);
    }
    const decision = BudgetDecision.safeParse(answer.payload);
    if (!decision.success || !decisionRaises(decision.data)) {
      return costSpentError(pausedAt, spentNano, `; a budget decision (${answer.signal}) stopped it`);
    }
    // The decision raised the budget when it was delivered: check again against what it is now.
    const now = (await ctx.deps.store.budget(plan.runId)).costUsd;
    if (now === undefined || nanoFromUsd(now) <= check.limitNano) {
      return costSpentError(pausedAt, spentNano, `; the budget decision (${answer.signal}) did not raise it`);
    }
    limitUsd = now;
  }
}

/**
 * Why `tenant`'s model calls (a planner's too) may not go out today: its daily cap (`dailyCostUsd`)
 * is spent. One `HGET` of today's ledger, only for a tenant with a cap.
 */
export async function dailyCapReached(
  deps: Pick<ExecutorDeps, 'cost'>,
  tenant: string,
): Promise<NodeErrorData | undefined> {
  const cost = deps.cost;
  const cap = cost?.ceilings.dailyCostUsd(tenant);
  if (!cost || cap === undefined) return undefined;
  return checkDailyCap(tenant, cap, await cost.ledger.spentNano(tenant, costDay(new Date())));
}

/**
 * Prices `calls` model calls of `model` that used `usage` together, books them in the owner's
 * daily ledger and counts them in the metrics. Answers their cost in nano-dollars, or undefined
 * when the model has no price (or nothing prices calls here). A ledger that cannot be written is
 * logged, not thrown: the call is made and paid for, and asking it again would cost twice.
 */
export async function recordModelCost(
  deps: Pick<ExecutorDeps, 'cost' | 'logger'>,
  owner: CostOwner,
  model: string,
  usage: PricedUsage,
  calls: number,
): Promise<number | undefined> {
  const cost = deps.cost;
  if (!cost) return undefined;
  const price = cost.prices.priceOf(model);
  const nano = price ? costOf(price, usage) : undefined;
  const booked = price?.model ?? model;
  observeModelCost(
    { model: booked, agent: owner.agentId, tenant: owner.tenant },
    nano === undefined ? undefined : usdFromNano(nano),
    calls,
  );
  try {
    await cost.ledger.record({
      tenant: owner.tenant,
      agentId: owner.agentId,
      ...(owner.sessionKey ? { session: unscopeName(owner.sessionKey).name } : {}),
      model: booked,
      calls,
      costNanoUsd: nano,
      day: costDay(new Date()),
    });
  } catch (err) {
    deps.logger.warn(
      { err, model: booked, tenant: owner.tenant },
      'the cost ledger could not book a model call',
    );
  }
  return nano;
}

/** What a model call charges the run beside its tokens: its cost, or one unpriced call. */
export const costCharge = (costNanoUsd: number | undefined, calls: number): UsageCharge =>
  costNanoUsd === undefined ? { unpricedModelCalls: calls } : { costNanoUsd };

/** The usage event's and the node usage's cost fields: `costUsd` when priced. */
export const costFields = (costNanoUsd: number | undefined): { costUsd?: number } =>
  costNanoUsd === undefined ? {} : { costUsd: usdFromNano(costNanoUsd) };

/** The charge of a planner's calls (tokens, calls and cost), booked in the owner's ledger. */
export async function plannerCharge(
  deps: Pick<ExecutorDeps, 'cost' | 'logger'>,
  owner: CostOwner,
  outcome: { readonly usage: PricedUsage; readonly calls: number; readonly model: string },
): Promise<UsageCharge> {
  const tokens = {
    promptTokens: outcome.usage.promptTokens,
    completionTokens: outcome.usage.completionTokens,
    modelCalls: outcome.calls,
  };
  // A plan from the plan cache made no call.
  if (outcome.calls === 0) return tokens;
  const nano = await recordModelCost(deps, owner, outcome.model, outcome.usage, outcome.calls);
  return { ...tokens, ...costCharge(nano, outcome.calls) };
}
