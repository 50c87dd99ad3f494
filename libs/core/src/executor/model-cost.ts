/**
 * Money around model calls: after a call, its price (the price table), the tenant's daily ledger
 * and the cost metric; the charge of a planner's calls. The prices are `cost/`'s; this is where
 * they meet the run, the ledger and the metrics.
 */
import { costDay, costOf, usdFromNano, type PricedUsage } from '../cost/price-table.js';
import type { UsageCharge } from '../domain/run-model.js';
import { unscopeName } from '../domain/tenant.js';
import { observeModelCost } from '../telemetry/metrics.js';
import type { ExecutorDeps } from './deps.js';

/** Whose calls these are: what the ledger books them under. */
export interface CostOwner {
  readonly tenant: string;
  readonly agentId: string;
  /** A session run's session as stored (tenant-scoped). */
  readonly sessionKey: string | null;
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
