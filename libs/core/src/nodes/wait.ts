/**
 * A `wait` node, in one of two forms; either way its job sits in BullMQ's delayed set and holds no
 * worker slot while it waits.
 * - For a signal: done when its named signal arrives (`POST /v1/runs/:id/signals/:name`; the
 *   signal's body is its output), or when its timeout passes; delivering the signal promotes the
 *   job. The signal is accepted only while the node waits, or earlier with `acceptEarly`.
 * - A sleep (`until` a time, or `forMs`): done at the wake time, kept in the run's record from its
 *   first execution, so a worker or Redis restart neither restarts the sleep nor wakes it twice.
 */
import { z } from 'zod';
import { MAX_RUN_SECONDS } from '../domain/wait-limits.js';
import type { NodeSnapshot } from '../domain/node-snapshot.js';
import { NodeId } from '../graph/schema.js';
import type { ExecutableKindSpec, NodeCheck, NodeRun } from './kind.js';

/** How long a signal wait waits when it sets no `timeoutSeconds`. */
export const DEFAULT_WAIT_SECONDS = 3600;

export const WaitNode = z.strictObject({
  id: NodeId,
  kind: z.literal('wait'),
  /** The signal to wait for; give it, or `until`, or `forMs`. */
  signal: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}')
    .optional(),
  /**
   * Signal waits: how long to wait for the signal, in seconds (at most `TETRALOOP_MAX_WAIT_DAYS`).
   * @defaultValue 3600
   */
  timeoutSeconds: z.number().positive().max(MAX_RUN_SECONDS).optional(),
  /** Signal waits: what no signal in time does. @defaultValue "fail" */
  onTimeout: z.enum(['fail', 'continue']).optional(),
  /**
   * Signal waits: accept the signal before the node waits for it (it is kept until the node runs).
   * Without it a signal is accepted only while the node waits. @defaultValue false
   */
  acceptEarly: z.boolean().optional(),
  /** A sleep to this instant (ISO 8601 with a zone, at most `TETRALOOP_MAX_WAIT_DAYS` away). */
  until: z.iso.datetime({ offset: true }).optional(),
  /** A sleep of this many ms from the node's first execution (at most `TETRALOOP_MAX_WAIT_DAYS`). */
  forMs: z
    .number()
    .int()
    .positive()
    .max(MAX_RUN_SECONDS * 1000)
    .optional(),
});
export type WaitNode = z.infer<typeof WaitNode>;

const FORMS = ['signal', 'until', 'forMs'] as const;
/** The fields only a signal wait takes. */
const SIGNAL_FIELDS = ['timeoutSeconds', 'onTimeout', 'acceptEarly'] as const;

/** One form per node, and nothing waits past the deployment's longest wait. Pure. */
function checkWait(node: WaitNode, check: NodeCheck): WaitNode | undefined {
  const given = FORMS.filter((f) => node[f] !== undefined);
  let ok = true;
  const issue = (field: string, message: string): void => {
    check.issue([field], message);
    ok = false;
  };
  if (given.length === 0) issue('signal', 'give one of signal, until and forMs');
  for (const extra of given.slice(1))
    issue(extra, `give one of signal, until and forMs, not ${given.join(' and ')}`);
  const sleeps = node.signal === undefined;
  if (sleeps) {
    for (const field of SIGNAL_FIELDS)
      if (node[field] !== undefined) issue(field, 'only a wait for a signal takes this field');
  }
  const { maxMs, now } = check.waits;
  const limit = `at most ${maxMs / 86_400_000} days (TETRALOOP_MAX_WAIT_DAYS)`;
  if (node.timeoutSeconds !== undefined && node.timeoutSeconds * 1000 > maxMs)
    issue('timeoutSeconds', `must be ${limit}`);
  if (node.forMs !== undefined && node.forMs > maxMs) issue('forMs', `must be ${limit}`);
  if (node.until !== undefined && Date.parse(node.until) - now > maxMs)
    issue('until', `must be ${limit} from now`);
  return ok ? node : undefined;
}

async function waitForSignal(run: NodeRun<WaitNode>, signal: string): Promise<NodeSnapshot> {
  const { node } = run;
  const timeoutSeconds = node.timeoutSeconds ?? DEFAULT_WAIT_SECONDS;
  const state = await run.awaitSignal(signal, timeoutSeconds);
  if (state.delivered) return run.snapshot('succeeded', { output: state.payload });
  const error = {
    code: 'timeout' as const,
    message: `no signal "${signal}" within ${timeoutSeconds} s`,
  };
  const output =
    node.onTimeout === 'continue' ? { error: { code: error.code, message: error.message } } : undefined;
  return run.snapshot('failed', { error, ...(output ? { output } : {}) });
}

async function sleep(run: NodeRun<WaitNode>): Promise<NodeSnapshot> {
  const { node } = run;
  // A `forMs` sleep counts from its first execution: the store keeps that first wake time.
  const wakeAt = node.until !== undefined ? Date.parse(node.until) : Date.now() + (node.forMs ?? 0);
  const slept = await run.sleepUntil(wakeAt);
  const until = new Date(slept.wakeAt).toISOString();
  if (slept.woke) return run.snapshot('succeeded', { output: { until } });
  // Cut off like any call the run's deadline cuts off: the node ends cancelled, the run timed_out.
  return run.fail({ code: 'aborted', message: `the run's deadline came before the wake time ${until}` });
}

export const waitKind: ExecutableKindSpec<WaitNode> = {
  kind: 'wait',
  schema: WaitNode,
  referenceFields: [],
  check: checkWait,
  variesOnRetry: false,
  mayBeFallback: false,
  replansInWindow: false,
  // A wait has one outcome per signal or wake time: nothing to retry.
  retryable: false,
  retry: () => undefined,
  chargesToolCall: false,
  usesToolTime: false,
  defaultTimeout: 'per-call',
  // Its own `timeoutSeconds` or wake time bounds the wait; no call limit applies.
  timeoutMs: () => undefined,
  // It parks until its signal, its timeout or its wake time.
  mayRunHandedOff: false,
  declaredToolCall: () => undefined,
  label: () => 'wait',
  continuesOnFailure: (node) => node.onTimeout === 'continue',
  replansOnFailure: () => false,
  charge: () => ({}),
  run: (run) => (run.node.signal !== undefined ? waitForSignal(run, run.node.signal) : sleep(run)),
};
