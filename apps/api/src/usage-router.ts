/**
 * `GET /v1/usage`: what the caller's tenant spent on model calls on one UTC day, in total and per
 * agent, session and model, read from the cost ledger (`state/cost-ledger.ts`).
 */
import type { RequestHandler } from 'express';
import { CostDay, costDay } from '@tetraloop/core/cost';
import type { CostLedger } from '@tetraloop/core/state';
import { z } from 'zod';
import { callerOf } from './auth.js';
import { zodToHttp } from './http-errors.js';
import type { RouteName } from './route-table.js';

export interface UsageRouterDeps {
  readonly costs: CostLedger;
}

/** `?day=YYYY-MM-DD` (UTC); today when absent. */
const UsageQuery = z.strictObject({ day: CostDay.optional() });

export function usageHandlers(deps: UsageRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const get: RequestHandler = async (req, res) => {
    const query = UsageQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const day = query.data.day ?? costDay(new Date());
    res.json(await deps.costs.day(callerOf(res).tenant, day));
  };
  return { 'usage.get': get };
}
