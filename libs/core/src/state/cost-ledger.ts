/**
 * The cost ledger: what each tenant's model calls cost per UTC day, in Redis. One hash per tenant
 * and day (`costDayKey`) holds integer nano-dollars and call counts for the tenant, and per agent,
 * session and model; a call is booked with one `MULTI` on that one key (atomic, one round trip)
 * that also gives the key its TTL. The prices and the rules are the cost module's
 * (`cost/price-table.ts`, `cost/budget-rules.ts`).
 */
import { z } from 'zod';
import type { RedisClient } from './redis-client.js';
import { usdFromNano } from '../cost/price-table.js';
import { costDayKey } from './keys.js';
import { slotMulti } from './slot-multi.js';

export interface CostLedgerOptions {
  readonly prefix: string;
  /** Days a day's totals are kept after the day. @defaultValue 35 */
  readonly days: number;
}

/** One model call (or a planner's calls) to book. */
export interface CostEntry {
  readonly tenant: string;
  readonly agentId: string;
  /** The session's name as its tenant gives it (not tenant-scoped), for session runs. */
  readonly session?: string;
  /** The model's name in the price table, or as called when it has no price. */
  readonly model: string;
  readonly calls: number;
  /** Nano-dollars; undefined when the model has no price. */
  readonly costNanoUsd: number | undefined;
  /** The UTC day to book it under (`YYYY-MM-DD`). */
  readonly day: string;
}

/** Spending of one agent, session or model on a day. */
export const CostTotal = z.object({
  costUsd: z.number().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
});
export type CostTotal = z.infer<typeof CostTotal>;

/** One tenant's spending on one UTC day (`GET /v1/usage`). */
export const DailyCost = z.object({
  tenant: z.string(),
  day: z.string(),
  costUsd: z.number().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
  /** Calls of models without a price: counted, not in `costUsd`. */
  unpricedModelCalls: z.number().int().nonnegative(),
  agents: z.record(z.string(), CostTotal),
  sessions: z.record(z.string(), CostTotal),
  models: z.record(z.string(), CostTotal),
});
export type DailyCost = z.infer<typeof DailyCost>;

const SCOPES = ['agent', 'session', 'model'] as const;
type Scope = (typeof SCOPES)[number];

export class CostLedger {
  constructor(
    private readonly redis: RedisClient,
    private readonly options: CostLedgerOptions,
  ) {}

  /** Books a call under its tenant's day: totals, and its agent's, session's and model's. */
  async record(entry: CostEntry): Promise<void> {
    const key = costDayKey(this.options.prefix, entry.tenant, entry.day);
    const cost = entry.costNanoUsd ?? 0;
    const multi = slotMulti(this.redis).hincrby(key, 'calls', entry.calls);
    const scopes: [Scope, string][] = [
      ['agent', entry.agentId],
      ['model', entry.model],
      ...(entry.session !== undefined ? [['session', entry.session] as [Scope, string]] : []),
    ];
    for (const [scope, name] of scopes) multi.hincrby(key, `calls:${scope}:${name}`, entry.calls);
    if (entry.costNanoUsd === undefined) {
      multi.hincrby(key, 'unpriced', entry.calls);
    } else if (cost > 0) {
      multi.hincrby(key, 'cost', cost);
      for (const [scope, name] of scopes) multi.hincrby(key, `cost:${scope}:${name}`, cost);
    }
    // Kept `days` after the end of its day.
    const end = Date.parse(`${entry.day}T00:00:00Z`) / 1000 + 86_400;
    multi.expireat(key, end + this.options.days * 86_400);
    const replies = await multi.exec();
    for (const [err] of replies ?? []) if (err) throw err;
  }

  /** What `tenant`'s calls cost on `day`, in nano-dollars. */
  async spentNano(tenant: string, day: string): Promise<number> {
    return Number((await this.redis.hget(costDayKey(this.options.prefix, tenant, day), 'cost')) ?? 0);
  }

  /** `tenant`'s spending on `day`, with its agents', sessions' and models' (all zero once expired). */
  async day(tenant: string, day: string): Promise<DailyCost> {
    const hash = await this.redis.hgetall(costDayKey(this.options.prefix, tenant, day));
    // Maps, not objects: an agent may be called `__proto__`.
    const groups = new Map<Scope, Map<string, { cost: number; calls: number }>>(
      SCOPES.map((scope) => [scope, new Map()]),
    );
    for (const [field, value] of Object.entries(hash)) {
      const first = field.indexOf(':');
      const second = field.indexOf(':', first + 1);
      if (first < 0 || second < 0) continue;
      const kind = field.slice(0, first);
      const group = groups.get(field.slice(first + 1, second) as Scope);
      if ((kind !== 'cost' && kind !== 'calls') || !group) continue;
      const name = field.slice(second + 1);
      const total = group.get(name) ?? { cost: 0, calls: 0 };
      total[kind === 'cost' ? 'cost' : 'calls'] = Number(value);
      group.set(name, total);
    }
    const shown = (scope: Scope): Record<string, CostTotal> =>
      Object.fromEntries(
        [...(groups.get(scope) ?? [])]
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([name, t]) => [name, { costUsd: usdFromNano(t.cost), modelCalls: t.calls }]),
      );
    return {
      tenant,
      day,
      costUsd: usdFromNano(Number(hash.cost ?? 0)),
      modelCalls: Number(hash.calls ?? 0),
      unpricedModelCalls: Number(hash.unpriced ?? 0),
      agents: shown('agent'),
      sessions: shown('session'),
      models: shown('model'),
    };
  }
}
