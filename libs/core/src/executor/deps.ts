/**
 * What the plan and node executors need, injected once per pool: the run store, the run's queues,
 * the retry and backoff policy, the tools and model, and the hooks into plugins and sessions.
 */
import type { Logger } from 'pino';
import type { RunArchiver } from '../archive/run-archiver.js';
import type { Ceilings } from '../ceilings/ceilings.js';
import type { PriceTable } from '../cost/price-table.js';
import type { NodeErrorData } from '../errors/node-error.js';
import type { HookRegistry } from '../hooks/hook-registry.js';
import type { ModelClient } from '../model/model-client.js';
import type { PlanningDeps } from '../planning/plan-run.js';
import type { BackoffPolicy, RetryTable } from '../policy/retry-policy.js';
import type { ToolCallJobData } from '../queues/catalog.js';
import type { RunQueues } from '../queues/run-jobs.js';
import type { WebhookOutbox } from '../queues/webhook-jobs.js';
import type { CallLessonDeps } from '../reflect/lesson-effects.js';
import type { MemoryService } from '../reflect/memory-service.js';
import type { CostLedger } from '../state/cost-ledger.js';
import type { RunStore } from '../state/runs/run-store.js';
import type { SecretStore } from '../state/secret-store.js';
import type { TenantSlots } from '../state/tenant-slots.js';
import type { RunNodeSlots } from '../state/slot-sets.js';
import type { CustomTool } from '../tools/custom-tool.js';
import type { ToolOutcome, ToolRegistry } from '../tools/tool.js';
import type { FlowGate } from './flow-gate.js';
import type { PlanCache } from './plan-cache.js';
import type { RunAborts } from './run-aborts.js';

/**
 * Called before an `auth` failure is retried, so credentials can be renewed. May answer a new key
 * for the model client (`modelApiKey`), used from then on.
 */
export type CredentialRefreshHook = (context: {
  runId: string;
  nodeId: string;
  tool: string;
  error: NodeErrorData;
}) => Promise<void | { modelApiKey?: string }>;

export interface ExecutorHooks {
  readonly refreshCredentials?: CredentialRefreshHook;
  /** Plugin hooks (before/after tool calls, session hooks). */
  readonly registry?: HookRegistry;
}

/** What prices model calls and counts their cost: the price table, the daily ledger, the caps. */
export interface CostDeps {
  readonly prices: PriceTable;
  readonly ledger: CostLedger;
  /** Tenants' daily caps (`dailyCostUsd`) and the ceiling of money budgets. */
  readonly ceilings: Ceilings;
}

/** What the run loop tells the session layer, when runs belong to session lanes. */
export interface SessionHooks {
  /** A run settled: reply in its session and move the lane on. */
  onRunSettled(runId: string): Promise<void>;
  /** The current version of a session's environment. */
  environmentVersion(sessionKey: string): Promise<number>;
}

/**
 * Sends a custom tool's call to the tool's queue and awaits its outcome (`remote-tool-call.ts`):
 * how an agent or a loop calls a tool whose code its process did not load.
 */
export interface RemoteToolCaller {
  call(
    tool: CustomTool,
    data: Omit<ToolCallJobData, 'deadlineAt'>,
    stops: { readonly runSignal: AbortSignal; readonly shutdown?: AbortSignal },
  ): Promise<ToolOutcome>;
}

export interface ExecutorDeps {
  readonly store: RunStore;
  readonly plans: PlanCache;
  readonly queues: RunQueues;
  readonly retries: RetryTable;
  readonly backoff: BackoffPolicy;
  /** A node executed more often than this in one run is stopped as a suspected loop. @defaultValue 5 */
  readonly maxNodeExecutions: number;
  /**
   * How many released nodes one node job may run after its own, in the same slot (`handoff.ts`).
   * 0 or absent: every node gets a job. @defaultValue 32 (`TETRALOOP_NODE_HANDOFF`)
   */
  readonly handoff?: number;
  /**
   * How many nodes one node job may run at once when a completion releases several (wide handoff).
   * 1 or absent: one at a time. @defaultValue 8 (`TETRALOOP_NODE_HANDOFF_WIDTH`)
   */
  readonly handoffWidth?: number;
  /** True once the process is shutting down: node jobs then hand nothing off. */
  readonly stopping?: () => boolean;
  /**
   * Aborted when the process starts shutting down: custom tool calls in flight get their
   * `ctx.signal` aborted and their nodes are handed back to their queue (`handBack`).
   */
  readonly shutdown?: AbortSignal;
  readonly hooks: ExecutorHooks;
  readonly tools: ToolRegistry;
  /**
   * The tools an agent may use (TETRALOOP_AGENTS, TETRALOOP_AGENT_TOOLS): what its agent loops are
   * offered and may call. Absent: every tool in `tools`.
   */
  readonly allowedTools?: (agentId: string) => ReadonlySet<string>;
  /**
   * The tool queues this process's tool pool serves (`default`: the node queue): a node of
   * another queue is never handed off to it. @defaultValue ["default"]
   */
  readonly servedQueues?: readonly string[];
  /**
   * The output schema of another version of a custom tool (by its schema hash), from the catalog:
   * what a run checked against an older or newer version expects its output to be.
   */
  readonly toolOutputSchema?: (
    tool: string,
    schemaHash: string,
  ) => Readonly<Record<string, unknown>> | undefined;
  /**
   * Where an agent's or a loop's call of a custom tool without code here goes (the tool's queue).
   * Absent: such a call fails `internal`/`tool_code_missing`.
   */
  readonly remoteCalls?: RemoteToolCaller;
  /** Where `{"$secret"}` references are read at call time (refuses them without `TETRALOOP_SECRET_KEY`). */
  readonly secrets?: SecretStore;
  /** The deployment's key for outbound `Idempotency-Key`s (an HMAC key; see `secrets/call-key.ts`). */
  readonly callKey: Buffer;
  /** Absent when no model is configured: llm nodes and agents then fail with a clear error. */
  readonly model?: ModelClient;
  /** Tool call limit of a node without its own `timeoutMs`. @defaultValue 10000 */
  readonly defaultTimeoutMs: number;
  /** Each referenced value in a prompt is cut to this many characters. @defaultValue 8000 */
  readonly modelInputChars: number;
  /**
   * How long a call held for approval waits for it (`TETRALOOP_APPROVAL_TIMEOUT_SECONDS`); never
   * past the run's deadline. @defaultValue 3600
   */
  readonly approvalTimeoutSeconds?: number;
  /**
   * How long a model call paused at the run's money budget waits for a budget decision
   * (`TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS`); never past the run's deadline. @defaultValue 3600
   */
  readonly budgetDecisionTimeoutSeconds?: number;
  /** A node output whose JSON text has more bytes than this is stored as a blob. @defaultValue 16384 */
  readonly blobMinBytes: number;
  /** Present where task runs are planned (the plan pool). */
  readonly planning?: PlanningDeps;
  readonly sessions?: SessionHooks;
  /** Aborts this process's node and planner calls for a run that is cancelled, fails or times out. */
  readonly aborts: RunAborts;
  /** Lessons applied where calls are dispatched (hard: refuse and probe; template: timeouts). */
  readonly lessons?: CallLessonDeps;
  /**
   * The cap on each tenant's running runs (the plan pool): the ceilings name the cap, the slots
   * count. Absent: no cap.
   */
  readonly admission?: { readonly ceilings: Ceilings; readonly slots: TenantSlots };
  /** The node slots of runs with a `maxParallelNodes` cap (`node-slots.ts`). Absent: no run is capped. */
  readonly nodeSlots?: RunNodeSlots;
  /** Flow control of tool and model calls (the tool pool): limits, counters, waking granted jobs. */
  readonly flow?: FlowGate;
  /** Where settled runs are recorded for the reflect loop (the plan pool). */
  readonly memory?: MemoryService;
  /** Prices model calls and books their cost. Absent: calls are neither priced nor booked. */
  readonly cost?: CostDeps;
  /** Where runs' events go out to their webhooks and their tenants' subscriptions. Absent: nowhere. */
  readonly webhooks?: WebhookOutbox;
  /** Where settled runs are archived (the plan pool). Absent (no `TETRALOOP_ARCHIVE_DIR`): nowhere. */
  readonly archive?: RunArchiver;
  readonly logger: Logger;
}

/** An `auth` failure is retried once, and only when something can refresh the credentials. */
export function retryTableFor(deps: Pick<ExecutorDeps, 'retries' | 'hooks'>): RetryTable {
  return { ...deps.retries, auth: deps.hooks.refreshCredentials ? 1 : 0 };
}
