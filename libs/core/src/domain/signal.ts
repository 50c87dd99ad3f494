/**
 * Signals and the waits they answer: who decided a signal (the caller's key and tenant, and when)
 * and the record a node keeps of each wait — a wait node's signal or a held tool call's approval.
 * Types and schemas only.
 */
import { z } from 'zod';
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
  decidedBy: SignalDecision.optional(),
});
export type WaitRecord = z.infer<typeof WaitRecord>;

/** Signal names a client may post: wait nodes' own (64 characters at most) and approvals' longer ones. */
export const SIGNAL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,256}$/;

/** Why a signal was not accepted; each maps to one HTTP status in the API. */
export const SIGNAL_REFUSALS = [
  'signal_not_awaited',
  'run_finished',
  'too_many_signals',
  'signal_too_large',
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
