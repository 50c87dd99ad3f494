import { z } from 'zod';
import {
  Budget,
  DEFAULT_LOOP_ITERATIONS,
  MAX_RUN_SECONDS,
  MAX_RUN_TAGS,
  OnBudget,
  RunTag,
  type WindowSettings,
} from '../domain/run-model.js';
import { RunWebhook } from '../domain/webhook.js';
import { DEFAULT_PRIORITY, Priority } from '../flow/limits.js';
import { Thinking } from '../model/thinking.js';
import { SecretName } from '../secrets/secret-ref.js';

/** Most secrets one request may grant its planned nodes. */
export const MAX_SECRET_GRANTS = 50;

/**
 * The tenant secrets a request grants the nodes a model writes for it (plan, repair, replan,
 * window): a planned node referencing any other secret is rejected with its plan. A repeated name
 * counts once.
 */
export const SecretGrant = z
  .array(SecretName)
  .max(MAX_SECRET_GRANTS)
  .transform((names) => [...new Set(names)]);

/** Longest `task` (and `overrides`) a run request may have, in characters. */
export const MAX_TASK_CHARS = 200_000;

/** Most nodes a window may hold (`window`), and most windows a run may have (`maxWindows`). */
export const MAX_WINDOW_SIZE = 20;
export const MAX_WINDOWS = 50;
/** The longest cycle budget of a window (an hour), and the highest cap on a run's parallel nodes. */
export const MAX_CYCLE_BUDGET_MS = 3_600_000;
export const MAX_PARALLEL_NODES = 10_000;

/**
 * Body of `POST /v1/runs`: a fixed `graph`, or a `task` that the plan loop plans into one
 * (`mode: "dag"`), plans a few nodes at a time (`mode: "window"`), or that the classic
 * tool-calling loop works on (`mode: "loop"`). The graph is validated separately so every problem
 * gets a path.
 */
export const RunRequest = z
  .strictObject({
    graph: z.unknown().optional(),
    task: z.string().min(1).max(MAX_TASK_CHARS).optional(),
    /** @defaultValue "dag" */
    mode: z.enum(['dag', 'loop', 'window']).default('dag'),
    agentId: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match [A-Za-z0-9_-]{1,64}')
      .default('main'),
    /**
     * Task runs: the model the agent calls (loop mode) or that plans the task (dag mode), instead
     * of the deployment's; it must be one the deployment, the tenant and the agent allow.
     */
    model: z.string().min(1).max(200).optional(),
    /**
     * Task runs: how hard a reasoning model thinks, `"low"` or `{effort?, summary?}` (efforts
     * `minimal`, `low`, `medium`, `high`); `summary: true` keeps the reasoning the model returns.
     */
    thinking: Thinking.optional(),
    /** Extra instructions appended to the prompt, after the workspace files. */
    overrides: z.string().max(MAX_TASK_CHARS).optional(),
    /**
     * Task runs: the tenant secrets the planned nodes may reference (`{"$secret": "NAME"}`), beside
     * the agent's declared ones. A fixed graph names its secrets itself.
     */
    secrets: SecretGrant.optional(),
    /** Loop mode: most model turns. @defaultValue 10 */
    maxIterations: z.number().int().min(1).max(50).default(DEFAULT_LOOP_ITERATIONS),
    /** Task runs: most replans (dag mode; window mode bounds its windows instead). @defaultValue 2 */
    maxReplans: z.number().int().min(0).max(10).default(2),
    /** Window mode: most nodes per window. Unset: the deployment's `TETRALOOP_PLAN_WINDOW`. */
    window: z.number().int().min(1).max(MAX_WINDOW_SIZE).optional(),
    /** Window mode: most windows (planner calls that install nodes). Unset: `TETRALOOP_PLAN_MAX_WINDOWS`. */
    maxWindows: z.number().int().min(1).max(MAX_WINDOWS).optional(),
    /**
     * Window mode: how long a window may run (ms) before the nodes it has not started go back to
     * the planner with the next window. 0: no budget. Unset: `TETRALOOP_PLAN_CYCLE_BUDGET_MS`.
     */
    cycleBudgetMs: z.number().int().min(0).max(MAX_CYCLE_BUDGET_MS).optional(),
    /**
     * Most of the run's node jobs that run at once; the others wait queued. Unset:
     * `TETRALOOP_MAX_PARALLEL_NODES` (0 there: no cap).
     */
    maxParallelNodes: z.number().int().min(1).max(MAX_PARALLEL_NODES).optional(),
    input: z.unknown().optional(),
    /** Run deadline. @defaultValue 600 */
    timeoutSeconds: z.number().int().positive().max(MAX_RUN_SECONDS).default(600),
    /** Execution budget; unset fields take the deployment's defaults. */
    budget: Budget.optional(),
    /**
     * What a model call does when the money budget (`budget.costUsd`) is spent: `fail`, or `pause`
     * for a budget decision (a signal that raises the budget or stops). @defaultValue "fail"
     */
    onBudget: OnBudget.default('fail'),
    metadata: z.record(z.string(), z.unknown()).optional(),
    /** 1 (lowest) to 10: which of a flow counter's waiting calls goes first. @defaultValue 5 */
    priority: Priority.default(DEFAULT_PRIORITY),
    /** Labels to find the run by (`GET /v1/runs?tag=`); a repeated tag counts once. */
    tags: z
      .array(RunTag)
      .max(MAX_RUN_TAGS)
      .transform((tags) => [...new Set(tags)])
      .optional(),
    /**
     * Post the run's events (`run.finished` by default) to `url`, signed with the tenant's signing
     * secret (`POST /v1/webhooks/secret`).
     */
    webhook: RunWebhook.optional(),
  })
  .superRefine((r, ctx) => {
    if ((r.graph === undefined) === (r.task === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [r.graph === undefined ? 'graph' : 'task'],
        message: 'give exactly one of graph and task',
      });
    }
    for (const field of ['model', 'thinking', 'secrets'] as const) {
      if (r[field] !== undefined && r.task === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: 'applies to task runs; a graph names it per node',
        });
      }
    }
    if (r.mode !== 'dag' && r.task === undefined) {
      ctx.addIssue({ code: 'custom', path: ['mode'], message: `${r.mode} mode needs a task` });
    }
    for (const field of ['window', 'maxWindows', 'cycleBudgetMs'] as const) {
      if (r[field] !== undefined && r.mode !== 'window') {
        ctx.addIssue({ code: 'custom', path: [field], message: 'only window mode takes this field' });
      }
    }
  });
export type RunRequest = z.infer<typeof RunRequest>;

/**
 * How many times a task run may be planned again, and its window settings in window mode. A window
 * after the first is installed like a replan, so window mode's bound is `maxWindows - 1` replans
 * (the request's `maxReplans` does not apply there).
 */
export function taskBounds(
  request: Pick<RunRequest, 'mode' | 'maxReplans' | 'window' | 'maxWindows' | 'cycleBudgetMs'>,
  defaults: WindowSettings,
): { maxReplans: number; window?: WindowSettings } {
  if (request.mode !== 'window') return { maxReplans: request.maxReplans };
  const cycleBudgetMs = request.cycleBudgetMs ?? defaults.cycleBudgetMs ?? 0;
  const window = {
    size: request.window ?? defaults.size,
    maxWindows: request.maxWindows ?? defaults.maxWindows,
    ...(cycleBudgetMs > 0 ? { cycleBudgetMs } : {}),
  };
  return { maxReplans: window.maxWindows - 1, window };
}
