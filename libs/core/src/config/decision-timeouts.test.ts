/** The approval and budget-decision waits as configured: an hour by default, never past the longest run. */
import { describe, expect, it } from 'vitest';
import { BaseEnv, decisionTimeoutsOf, parseEnv } from './env-schema.js';

// Parsed, not connected to: the URL only has to be one.
const timeouts = (env: Record<string, string>) =>
  decisionTimeoutsOf(parseEnv(BaseEnv, { REDIS_URL: 'redis://127.0.0.1:1', ...env }));

describe('decisionTimeoutsOf', () => {
  it('keeps an hour for either wait when unset', () => {
    expect(timeouts({})).toEqual({ approvalTimeoutSeconds: 3600, budgetDecisionTimeoutSeconds: 3600 });
  });

  it('takes days, cut to TETRALOOP_MAX_WAIT_DAYS', () => {
    expect(
      timeouts({
        TETRALOOP_APPROVAL_TIMEOUT_SECONDS: String(3 * 86_400),
        TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS: String(5 * 86_400),
        TETRALOOP_MAX_WAIT_DAYS: '4',
      }),
    ).toEqual({ approvalTimeoutSeconds: 3 * 86_400, budgetDecisionTimeoutSeconds: 4 * 86_400 });
  });

  it('refuses a value past what any deployment allows (365 days) or not a positive integer', () => {
    expect(() => timeouts({ TETRALOOP_APPROVAL_TIMEOUT_SECONDS: String(366 * 86_400) })).toThrow(
      /TETRALOOP_APPROVAL_TIMEOUT_SECONDS/,
    );
    expect(() => timeouts({ TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS: '0' })).toThrow(
      /TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS/,
    );
  });
});
