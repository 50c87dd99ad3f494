/**
 * How long a run may last. A run that waits — for a signal, an approval, a budget decision or a
 * time — holds no worker, so its deadline may be weeks away: up to `TETRALOOP_MAX_WAIT_DAYS`
 * (30 days by default), which a deployment may raise up to a year. Pure values.
 */

/** `TETRALOOP_MAX_WAIT_DAYS` when unset. */
export const DEFAULT_MAX_WAIT_DAYS = 30;

/** The largest `TETRALOOP_MAX_WAIT_DAYS`: what any request's `timeoutSeconds` is bounded by first. */
export const MAX_WAIT_DAYS_CEILING = 365;

const DAY_SECONDS = 86_400;

/**
 * The longest deadline (`timeoutSeconds`) a run request may state in any deployment; the
 * deployment's own, `maxRunSeconds(TETRALOOP_MAX_WAIT_DAYS)`, is checked where a run is accepted.
 */
export const MAX_RUN_SECONDS = MAX_WAIT_DAYS_CEILING * DAY_SECONDS;

/** The longest deadline a run may have, and the longest any of its waits, under `maxWaitDays`. */
export const maxRunSeconds = (maxWaitDays: number): number => maxWaitDays * DAY_SECONDS;

/**
 * How long a call held for approval (`requireApproval` from a `before_tool_call` hook) waits for
 * it, and a model call paused at its run's money budget (`onBudget: "pause"`) for a budget
 * decision, when unset: an hour, as before these were settings. Either wait is also cut off by its
 * run's deadline, whichever comes first.
 */
export const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 3600;
export const DEFAULT_BUDGET_DECISION_TIMEOUT_SECONDS = 3600;
