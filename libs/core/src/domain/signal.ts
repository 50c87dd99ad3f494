/**
 * Signals and the waits they answer: who decided a signal (the caller's key and tenant, and when)
 * and the record a node keeps of each wait — a wait node's signal or a held tool call's approval.
 * Types and schemas only.
 */
import { z } from 'zod';
import { MAX_BUDGET_COST_USD } from './node-snapshot.js';
import { TenantId } from './tenant.js';

/** Who delivered a signal: the API key (null without auth), its tenant, and when it was accepted. */
export const SignalDecision = z.object({
  keyId: z.string().nullable(),
  tenant: TenantId,
  at: z.string(),
});
export type SignalDecision = z.infer<typeof SignalDecision>;

/** One wait of a node, from the moment it began; `decidedBy` once its signal was delivered. */
export const WaitRecord = z.object({
  /** The signal it waits for; an approval's carries its nonce (`approve.<nodeId>.<nonce>`). */
  signal: z.string(),
  since: z.string(),
  /** Its deadline. */
  until: z.string(),
  generation: z.number().int().nonnegative(),
  /** For a held tool call: the tool and the reason the hook gave. */
  approval: z.object({ tool: z.string(), reason: z.string() }).optional(),
  /** For a paused model call: the run's money budget and what it had spent (USD). */
  budget: z.object({ costUsd: z.number(), spentUsd: z.number() }).optional(),
  decidedBy: SignalDecision.optional(),
});
export type WaitRecord = z.infer<typeof WaitRecord>;

/** Signal names a client may post: wait nodes' own (64 characters at most) and approvals' longer ones. */
export const SIGNAL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,256}$/;

/**
 * The prefix of a budget decision's signal: `budget.<nonce>`, the nonce drawn when the run's
 * model calls paused over its money budget (`onBudget: "pause"`).
 */
export const BUDGET_SIGNAL_PREFIX = 'budget.';
export const isBudgetSignal = (name: string): boolean => name.startsWith(BUDGET_SIGNAL_PREFIX);

/**
 * The payload of a budget decision: raise the run's money budget to `costUsd` (USD, above the
 * current one), or stop (the paused calls fail `budget_exhausted`).
 */
export const BudgetDecision = z
  .strictObject({
    costUsd: z.number().positive().max(MAX_BUDGET_COST_USD).optional(),
    stop: z.literal(true).optional(),
  })
  .refine((d) => (d.costUsd === undefined) !== (d.stop === undefined), {
    message: 'give exactly one of costUsd (a higher budget, USD) and stop (true)',
  });
export type BudgetDecision = z.infer<typeof BudgetDecision>;

/** Why a signal was not accepted; each maps to one HTTP status in the API. */
export const SIGNAL_REFUSALS = [
  'signal_not_awaited',
  'run_finished',
  'too_many_signals',
  'signal_too_large',
  /** A budget decision's `costUsd` that is not above the run's budget (after the ceiling). */
  'budget_not_raised',
] as const;
export type SignalRefusal = (typeof SIGNAL_REFUSALS)[number];

/** What delivering a signal came to. */
export type SignalOutcome =
  | { readonly outcome: 'delivered' | 'duplicate' | 'unknown_run' }
  | {
      readonly outcome: 'refused';
      readonly code: SignalRefusal;
      readonly message: string;
      readonly limit?: number;
    };

/** Caps on a run's signals: how many it keeps and how large each payload's JSON may be. */
export interface SignalLimits {
  /** @defaultValue 100 */
  readonly maxPerRun: number;
  /** @defaultValue 65536 */
  readonly maxBytes: number;
}
