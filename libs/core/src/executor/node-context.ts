/** One execution of one node as the harness holds it: the job, the node, the run's state as read at begin. */
import { hostname } from 'node:os';
import { DelayedError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type {
  AttemptRecord,
  LiveNodeState,
  NodeSnapshot,
  NodeUsage,
  SignalDecision,
} from '../domain/run-model.js';
import { nowIso } from '../domain/clock.js';
import { limitError } from '../errors/limit-error.js';
import type { NodeErrorData } from '../errors/node-error.js';
import { resolveReferences } from '../graph/references.js';
import { executionOf, type ExecutableNode, type ToolCallOptions } from '../nodes/index.js';
import { callLimit, type CallLimit } from '../policy/limits.js';
import type { NodeJobData } from '../queues/catalog.js';
import type { RunEventNotice } from '../queues/webhook-jobs.js';
import type { BeginNodeResult } from '../state/runs/node-state.js';
import type { WaitSpec } from '../state/runs/run-signals.js';
import type { Tool, ToolOutcome } from '../tools/tool.js';
import { isCustomTool, toolCodeMissing, type CustomTool } from '../tools/custom-tool.js';
import { valueChecker } from '../mcp/args-schema.js';
import { customToolContext, type CustomCall } from './custom-tool-context.js';
import { toolSlot } from './tool-concurrency.js';
import { callIdempotencyKey } from '../secrets/call-key.js';
import { fillSecrets, scrubSecrets, withSecretsMasked, type SecretRef } from '../secrets/secret-ref.js';
import { secretRefusal, unscopedSecretMessage } from '../secrets/secret-scope.js';
import { SECRETS_OFF_MESSAGE, SecretStoreError, type ResolvedSecrets } from '../state/secret-store.js';
import type { ExecutorDeps } from './deps.js';
import { lessonsForCall, probed, type RateLimitFix } from '../reflect/lesson-effects.js';
import { failSpan, inSpan } from '../telemetry/tracing.js';
import { toolCallAttributes } from '../telemetry/genai.js';
import { failedCallEnd, passFlow } from './flow-gate.js';
import { invokeTool } from './invoke-tool.js';
import { OwnJobNeeded } from './handoff.js';
import type { CompiledPlan } from './plan-cache.js';

export const WORKER = `${hostname()}/${process.pid}`;

export interface NodeContext {
  readonly deps: ExecutorDeps;
  readonly job: Job;
  readonly token: string | undefined;
  readonly plan: CompiledPlan;
  readonly node: ExecutableNode;
  readonly generation: number;
  /** The job re-entered after parking itself (loop interval, wait). */
  readonly continuation: boolean;
  /**
   * Handed off: running in the job of the node that released it (`handoff.ts`). `job` is that
   * job, so a wait of any kind moves the node to a job of its own first (`ownJobFor`).
   */
  readonly inline: boolean;
  /** 1-based attempt number of this execution. */
  readonly attempt: number;
  /** How many attempts the node may make in all. */
  readonly attemptsAllowed: number;
  /** The `retry.vary` override this attempt runs with (1-based), when it runs with one. */
  readonly variant?: number;
  readonly startedAt: string;
  readonly started: number;
  readonly begin: BeginNodeResult;
  /** What references read: the run input and the dependencies' snapshots. */
  readonly scope: Readonly<Record<string, unknown>>;
  /** Aborted when the run is cancelled, fails elsewhere or times out. */
  readonly runSignal: AbortSignal;
  readonly log: Logger;
  /**
   * The tool (or `llm`) and target of this execution's last call, the lessons applied to it, and
   * how a template lesson retries its `rate_limited` failures.
   */
  readonly call: {
    tool?: string;
    target?: string;
    /** A custom tool's version and schema hash, when the call was one's. */
    toolVersion?: string;
    schemaHash?: string;
    lessons: string[];
    /** What the node's call was made with (`NodeRun.recordInput`), for its snapshot. */
    input?: unknown;
    rateLimit?: RateLimitFix;
    /** Calls that went through flow control in this execution (a later one waits in the worker). */
    flowCalls?: number;
  };
}

/** What references of a node read: the run input and the snapshots of its dependencies. */
export const scopeOf = (
  input: unknown,
  reads: ReadonlyMap<string, NodeSnapshot>,
): Record<string, unknown> => ({
  input,
  ...Object.fromEntries(reads),
});

export const resolve = (ctx: NodeContext, value: unknown): unknown => resolveReferences(value, ctx.scope);

/**
 * This execution as an attempt record. It and the snapshot below are built by assignment in the
 * order their JSON keeps, not by spreading optional parts: one of each per node execution, on the
 * hot path, where spreads cost several times as much.
 */
export function attemptRecord(
  ctx: NodeContext,
  extra: { error?: NodeErrorData; retryDelayMs?: number } = {},
): AttemptRecord {
  const record: AttemptRecord = {
    attempt: ctx.attempt,
    startedAt: ctx.startedAt,
    finishedAt: nowIso(),
    durationMs: Math.round(performance.now() - ctx.started),
    worker: WORKER,
  };
  if ('error' in extra) record.error = extra.error;
  if ('retryDelayMs' in extra) record.retryDelayMs = extra.retryDelayMs;
  const { call } = ctx;
  if (call.tool !== undefined) record.tool = call.tool;
  if (call.target !== undefined) record.target = call.target;
  if (call.toolVersion !== undefined) {
    record.toolVersion = call.toolVersion;
    record.schemaHash = call.schemaHash;
  }
  if (call.lessons.length > 0) record.lessons = [...call.lessons];
  if (ctx.variant !== undefined) record.variant = ctx.variant;
  if (ctx.inline && ctx.job.id !== undefined) record.carriedBy = ctx.job.id;
  return record;
}

/** A final snapshot of this execution, with the attempts recorded before it. */
export function snapshotOf(
  ctx: NodeContext,
  status: NodeSnapshot['status'],
  result: { output?: unknown; error?: NodeErrorData; usage?: NodeUsage },
): NodeSnapshot {
  const attempt = attemptRecord(ctx, result.error ? { error: result.error } : {});
  const snapshot: NodeSnapshot = { status } as NodeSnapshot;
  if (ctx.call.input !== undefined) snapshot.input = ctx.call.input;
  if (result.output !== undefined) snapshot.output = result.output;
  if (result.error) snapshot.error = result.error;
  snapshot.attempts = [...ctx.begin.attempts, attempt];
  snapshot.startedAt = ctx.begin.attempts[0]?.startedAt ?? ctx.startedAt;
  snapshot.finishedAt = attempt.finishedAt;
  snapshot.durationMs = attempt.durationMs;
  if (result.usage) snapshot.usage = result.usage;
  return snapshot;
}

/**
 * The tightest limit on a call made now. Without a `timeoutMs` of its own a node gets its kind's
 * default (the tool or the model timeout), or the tool's own minimum for these args when longer.
 */
export function limitFor(
  ctx: NodeContext,
  toolTimeUsedMs: number,
  toolMinimumMs = 0,
  modelCall = false,
  lessonTimeoutMs?: number,
): CallLimit {
  const kind = executionOf(ctx.node);
  const { model, defaultTimeoutMs } = ctx.deps;
  const modelDefault = kind.defaultTimeout === 'model' || (kind.defaultTimeout === 'per-call' && modelCall);
  const fallback = modelDefault && model ? model.config.timeoutMs : defaultTimeoutMs;
  return callLimit({
    // A node's own timeout wins; else a template lesson's for this service; else the default.
    nodeTimeoutMs: kind.timeoutMs(ctx.node) ?? Math.max(lessonTimeoutMs ?? fallback, toolMinimumMs),
    now: Date.now(),
    deadlineAt: ctx.begin.deadlineAt,
    toolTimeBudgetMs: ctx.begin.budget.toolTimeMs,
    toolTimeUsedMs,
  });
}

/**
 * Calls `tool` under the tightest limit. A call cut off by the run deadline is reported as aborted, one cut
 * off by the tool-time budget as budget_exhausted; only the node's own timeout is a `timeout`.
 */
export async function callTool(
  ctx: NodeContext,
  tool: Tool,
  args: unknown,
  toolTimeUsedMs: number,
  call: ToolCallOptions = {},
): Promise<ToolOutcome> {
  // Read with its secrets as strings of unknown content: the host a call reaches is known before
  // they are filled in (host limits, lessons and the call record keep it).
  const parsed = tool.input.safeParse(withSecretsMasked(args));
  const target = parsed.success ? tool.target?.(parsed.data) : undefined;
  ctx.call.tool = tool.name;
  ctx.call.target = target;
  if (isCustomTool(tool)) {
    ctx.call.toolVersion = tool.custom.version;
    ctx.call.schemaHash = tool.custom.schemaHash;
  }
  const lessons =
    target !== undefined && ctx.deps.lessons
      ? await lessonsForCall(ctx.deps.lessons, ctx.plan.memoryAgent, tool.name, target)
      : undefined;
  if (lessons) ctx.call.lessons.push(...lessons.applied.filter((id) => !ctx.call.lessons.includes(id)));
  ctx.call.rateLimit = lessons?.rateLimit;
  if (lessons?.blocked) return { ok: false, error: lessons.blocked };
  const minimum = parsed.success ? tool.minTimeoutMs?.(parsed.data) : undefined;
  // A custom tool's own time limit serves where a lesson gives none; the node's own wins over both.
  const toolTimeoutMs = isCustomTool(tool) ? tool.custom.timeoutMs : undefined;
  const limit = limitFor(ctx, toolTimeUsedMs, minimum, false, lessons?.timeoutMs ?? toolTimeoutMs);
  if (limit.ms <= 0) return { ok: false, error: limitError(limit) };
  const flow = await passFlow(ctx, {
    tool: tool.name,
    // The service the call reaches (the http tool: the URL's host).
    ...(target !== undefined ? { host: target } : {}),
    limitMs: limit.ms,
  });
  if (!flow.ok) return flow;
  // The call's span, by the GenAI conventions (`execute_tool <tool>`).
  const outcome = await inSpan(
    `execute_tool ${tool.name}`,
    {
      attributes: {
        ...toolCallAttributes(
          { name: tool.name, custom: isCustomTool(tool) },
          call.callId ?? `${ctx.node.id}:${call.index ?? '0'}`,
        ),
        ...(target !== undefined ? { 'server.address': target } : {}),
      },
    },
    async (span) => {
      const result = await callWithin(ctx, tool, args, limit, call);
      if (!result.ok) failSpan(span, result.error.code, result.error.message);
      return result;
    },
  );
  await flow.pass?.end(outcome.ok ? { succeeded: true } : failedCallEnd(outcome.error));
  // Aborted because this worker is shutting down, not for anything the call did: no class, no
  // lesson; another worker takes the attempt up.
  if (!outcome.ok && outcome.error.code === 'aborted' && shuttingDown(ctx)) await handBack(ctx);
  if (lessons?.probe && ctx.deps.lessons) {
    await probed(ctx.deps.lessons, ctx.plan.memoryAgent, lessons.probe, outcome.ok);
  }
  return outcome;
}

async function callWithin(
  ctx: NodeContext,
  tool: Tool,
  args: unknown,
  limit: CallLimit,
  call: ToolCallOptions,
): Promise<ToolOutcome> {
  const identity = {
    runId: ctx.plan.runId,
    nodeId: ctx.node.id,
    generation: ctx.generation,
    call: call.index ?? '0',
  };
  let idempotencyKey: string | undefined;
  const request: CallRequest = {
    timeoutMs: limit.ms,
    secrets: call.secrets ?? [],
    // Made when the call reads it (http, MCP and custom tools): an HMAC that most built-in calls
    // never read would otherwise cost every node.
    get idempotencyKey() {
      return (idempotencyKey ??= callIdempotencyKey(ctx.deps.callKey, identity));
    },
  };
  // Known from the catalog only (an agent's or a loop's call; a tool node's job never runs here):
  // a worker that has its code runs it.
  const outcome =
    isCustomTool(tool) && !tool.codeHere
      ? await callElsewhere(ctx, tool, args, request, call)
      : await runToolCall(ctx.deps, siteOf(ctx, tool), tool, args, request);
  if (!outcome.ok && outcome.error.code === 'timeout' && limit.kind !== 'timeout') {
    return { ok: false, error: limitError(limit) };
  }
  return outcome;
}

/** The call a tool's code runs for: its run, node and attempt, and what stops it. */
export interface CallSite extends Pick<
  CustomCall,
  'runId' | 'nodeId' | 'tenant' | 'agentId' | 'attempt' | 'log'
> {
  /** Aborted when the run is cancelled, fails elsewhere or times out. */
  readonly runSignal: AbortSignal;
  /** The schema hash of the custom tool the run was checked against, when it calls one. */
  readonly expectedSchema?: string;
}

/** What one call is given besides its args. */
export interface CallRequest {
  readonly timeoutMs: number;
  /** The `{"$secret"}` references of the args, filled in here. */
  readonly secrets: readonly SecretRef[];
  readonly idempotencyKey: string;
}

function siteOf(ctx: NodeContext, tool: Tool): CallSite {
  const expected = ctx.plan.toolSchemas[tool.name];
  return {
    runId: ctx.plan.runId,
    nodeId: ctx.node.id,
    tenant: ctx.plan.tenant,
    agentId: ctx.plan.agentId,
    attempt: ctx.attempt,
    // Read through, as the node context's own: only a custom tool's context logs, and a child
    // logger made for every other call would cost every node.
    get log() {
      return ctx.log;
    },
    runSignal: ctx.runSignal,
    ...(expected !== undefined ? { expectedSchema: expected } : {}),
  };
}

/**
 * Runs one call of a tool whose code is in this process: its secrets filled in and held to their
 * scopes, a custom tool's context and `concurrency`, the time limit, and what comes back masked of
 * every secret. The tool node's and the in-process agent's call, and a remote call's on the
 * worker that has the code (`remote-tool-call.ts`).
 */
export async function runToolCall(
  deps: Pick<ExecutorDeps, 'secrets' | 'store' | 'shutdown' | 'toolOutputSchema'>,
  site: CallSite,
  tool: Tool,
  args: unknown,
  request: CallRequest,
): Promise<ToolOutcome> {
  const secrets = await secretsOf(deps, site.tenant, request.secrets);
  if (!secrets.ok) return secrets;
  const sent = fillSecrets(args, request.secrets, secrets.values);
  // Where the call would send what it is given decides, before a byte goes out.
  const refused = secrets.values.size > 0 ? scopeRefusal(tool, sent, secrets) : undefined;
  if (refused) return { ok: false, error: refused };
  const base = {
    runId: site.runId,
    nodeId: site.nodeId,
    get idempotencyKey() {
      return request.idempotencyKey;
    },
  };
  // Secrets a custom tool read itself (`ctx.secret`): masked in what comes back like the others.
  const read = new Map<string, string>();
  // A custom tool's `concurrency` bounds its calls in this process.
  const limitCalls = isCustomTool(tool) ? tool.custom.concurrency : undefined;
  let release: (() => void) | undefined;
  if (limitCalls !== undefined) {
    try {
      release = await toolSlot(tool.name, limitCalls, site.runSignal);
    } catch {
      return { ok: false, error: { code: 'aborted', message: 'run aborted' } };
    }
  }
  const raw = await invokeTool(
    tool,
    sent,
    isCustomTool(tool)
      ? customToolContext(
          { ...site, ...(deps.secrets ? { secrets: deps.secrets } : {}), events: deps.store },
          tool,
          base,
          read,
        )
      : base,
    {
      timeoutMs: request.timeoutMs,
      runSignal: site.runSignal,
      // A custom tool is told of a shutdown and may stop cleanly; a built-in call finishes within
      // the shutdown grace.
      ...(isCustomTool(tool) && deps.shutdown ? { shutdownSignal: deps.shutdown } : {}),
    },
  ).finally(() => release?.());
  // Nothing that comes back (an output echoing the request, an error quoting it) keeps a value,
  // in any form the call made of it.
  const checked = isCustomTool(tool) ? againstExpectedSchema(deps, site.expectedSchema, tool, raw) : raw;
  return secrets.values.size > 0 || read.size > 0
    ? scrubSecrets(checked, [...secrets.values.values(), ...read.values(), ...derivedSecrets(tool, sent)])
    : checked;
}

/**
 * A custom tool this process has no code for, called by an agent or a loop: sent to the tool's
 * queue for a worker that has it (`remote-tool-call.ts`); the caller awaits its outcome.
 */
async function callElsewhere(
  ctx: NodeContext,
  tool: CustomTool,
  args: unknown,
  request: CallRequest,
  call: ToolCallOptions,
): Promise<ToolOutcome> {
  const remote = ctx.deps.remoteCalls;
  if (!remote) return { ok: false, error: toolCodeMissing(tool.name, WORKER) };
  const index = call.index ?? '0';
  const expected = ctx.plan.toolSchemas[tool.name];
  return remote.call(
    tool,
    {
      runId: ctx.plan.runId,
      nodeId: ctx.node.id,
      generation: ctx.generation,
      attempt: ctx.attempt,
      callId: call.callId ?? index,
      index,
      tool: tool.name,
      args,
      secrets: [...request.secrets].map((r) => ({ name: r.name, at: [...r.at] })),
      idempotencyKey: request.idempotencyKey,
      tenant: ctx.plan.tenant,
      agentId: ctx.plan.agentId,
      ...(expected !== undefined ? { expectedSchema: expected } : {}),
      timeoutMs: request.timeoutMs,
    },
    { runSignal: ctx.runSignal, ...(ctx.deps.shutdown ? { shutdown: ctx.deps.shutdown } : {}) },
  );
}

/** Compiled output schemas of other versions, by tool and hash (a rolling deploy has a few). */
const expectedCheckers = new Map<string, (value: unknown) => string[]>();

/**
 * A custom tool's output, held to the schema the run was checked against when the worker serves
 * another version of the tool (a rolling deploy): one it does not fit fails `validation`, never
 * passes silently. A version the catalog no longer lists is not checked (its attempt still
 * records which version answered).
 */
function againstExpectedSchema(
  deps: Pick<ExecutorDeps, 'toolOutputSchema'>,
  expected: string | undefined,
  tool: CustomTool,
  outcome: ToolOutcome,
): ToolOutcome {
  if (!outcome.ok || expected === undefined || expected === tool.custom.schemaHash) return outcome;
  const key = `${tool.name}@${expected}`;
  let check = expectedCheckers.get(key);
  if (!check) {
    const schema = deps.toolOutputSchema?.(tool.name, expected);
    if (!schema) return outcome;
    check = valueChecker({ ...schema });
    if (expectedCheckers.size >= 100) expectedCheckers.clear();
    expectedCheckers.set(key, check);
  }
  const problems = check(outcome.output);
  if (problems.length === 0) return outcome;
  return {
    ok: false,
    error: {
      code: 'validation',
      message: `tool ${tool.name} version ${tool.custom.version} (schema ${tool.custom.schemaHash}) answered an output the run's schema ${expected} does not accept: ${problems.slice(0, 5).join('; ')}`,
    },
  };
}

/**
 * Why the call with `sent` (its secrets filled in) may not carry them: a secret whose scope does
 * not allow the host the call reaches (a tool with a destination: the http tool) or the tool
 * itself, or a secret stored without a scope. Args that do not fit the tool's schema are refused
 * by the call itself, before it sends anything.
 */
function scopeRefusal(tool: Tool, sent: unknown, secrets: ResolvedSecrets): NodeErrorData | undefined {
  const parsed = tool.input.safeParse(sent);
  if (!parsed.success) return undefined;
  const url = tool.destination?.(parsed.data);
  for (const name of secrets.values.keys()) {
    const scope = secrets.scopes.get(name) ?? null;
    const message =
      scope === null
        ? unscopedSecretMessage(name)
        : secretRefusal(name, scope, { tool: tool.name, ...(url ? { url } : {}) });
    if (message !== undefined) return { code: 'validation', message, reason: 'secret_not_allowed' };
  }
  return undefined;
}

/** What the call makes of its args and sends besides them (Basic auth's `user:password`). */
function derivedSecrets(tool: Tool, sent: unknown): string[] {
  if (!tool.derivedSecrets) return [];
  const parsed = tool.input.safeParse(sent);
  return parsed.success ? tool.derivedSecrets(parsed.data) : [];
}

/**
 * The values of the secrets a call's declared args reference, and their scopes, read from the
 * run's tenant's store now; a call that needs one that is missing (or secrets that are off) fails
 * as `validation`.
 */
async function secretsOf(
  deps: Pick<ExecutorDeps, 'secrets'>,
  tenant: string,
  refs: readonly SecretRef[],
): Promise<({ ok: true } & ResolvedSecrets) | { ok: false; error: NodeErrorData }> {
  if (refs.length === 0) return { ok: true, values: new Map(), scopes: new Map(), missing: [] };
  const store = deps.secrets;
  const where = `args.${refs[0]!.at.join('.')}`;
  if (!store?.configured) {
    return {
      ok: false,
      error: { code: 'validation', message: `${where} uses a secret, but ${SECRETS_OFF_MESSAGE}` },
    };
  }
  try {
    const resolved = await store.resolve(
      tenant,
      refs.map((r) => r.name),
    );
    const { missing } = resolved;
    if (missing.length > 0) {
      const names = missing.map((n) => `"${n}"`).join(', ');
      return {
        ok: false,
        error: {
          code: 'validation',
          message: `no secret ${names} for tenant "${tenant}" (write it with PUT /v1/secrets/${missing[0]})`,
        },
      };
    }
    return { ok: true, ...resolved };
  } catch (err) {
    if (err instanceof SecretStoreError)
      return { ok: false, error: { code: 'validation', message: err.message } };
    throw err;
  }
}

/**
 * Hands a node's event to the run's webhooks, if any want it. A webhook serves its receiver, never
 * the run: a failure to enqueue is logged and the node goes on.
 */
export async function announce(ctx: NodeContext, notice: RunEventNotice): Promise<void> {
  if (!ctx.deps.webhooks) return;
  try {
    await ctx.deps.webhooks.nodeEvent(ctx.plan.runId, notice);
  } catch (err) {
    ctx.log.warn({ err, type: notice.type }, 'could not enqueue the webhook deliveries of a node event');
  }
}

/** A handed-off node cannot park its carrier's job: it goes on in a job of its own (`handoff.ts`). */
export function ownJobFor(ctx: NodeContext, reason: string): void {
  if (ctx.inline) throw new OwnJobNeeded(reason);
}

/**
 * Marks the node's job to re-enter as a continuation once it parks (delayed, or waiting for its
 * children), keeping when the node first started in this attempt: its snapshot's start and
 * duration count from the first entry, not the last (see `enteredAtOf`).
 */
export async function markContinuation(
  ctx: Pick<NodeContext, 'job' | 'startedAt' | 'attempt'>,
): Promise<void> {
  await ctx.job.updateData({
    ...(ctx.job.data as object),
    continuation: true,
    enteredAt: ctx.startedAt,
    enteredAttempt: ctx.attempt,
  });
}

/**
 * When a node job re-entering as a continuation first started: its `enteredAt`, if that was
 * marked by the attempt now running. A retry is a new attempt (BullMQ keeps the job's data across
 * attempts), so its start and time limit count from its own start, not the earlier attempt's.
 */
export function enteredAtOf(
  data: Pick<NodeJobData, 'continuation' | 'enteredAt' | 'enteredAttempt'>,
  attempt: number,
): string | undefined {
  if (!data.continuation) return undefined;
  return data.enteredAttempt === undefined || data.enteredAttempt === attempt ? data.enteredAt : undefined;
}

/** Parks the node job in the delayed set until `until`; it re-enters as a continuation. */
export async function park(ctx: NodeContext, until: number): Promise<never> {
  ownJobFor(ctx, 'park');
  if (ctx.token === undefined) throw new Error('parking a node job needs a worker token');
  await markContinuation(ctx);
  await ctx.job.moveToDelayed(until, ctx.token);
  throw new DelayedError();
}

/** The process is shutting down, and the node's run goes on (a cancelled run's node is not handed back). */
const shuttingDown = (ctx: NodeContext): boolean =>
  ctx.deps.shutdown?.aborted === true && !ctx.runSignal.aborted;

/**
 * The worker is shutting down in the middle of the node's custom tool call, which it aborted: the
 * node's job goes back to its queue now, its attempt neither failed nor ended (no error class, no
 * retry counted), and another worker re-enters that attempt (`resumes`: the same attempt number,
 * the same idempotency key, not counted or charged again), as after a crash but without waiting
 * for the job's lock to lapse. A handed-off node moves to a job of its own for it.
 */
export async function handBack(ctx: NodeContext): Promise<never> {
  ownJobFor(ctx, 'hand back on shutdown');
  if (ctx.token === undefined) throw new Error('handing a node job back needs a worker token');
  ctx.log.info('worker shutting down: node handed back to its queue mid-call');
  await ctx.job.updateData({ ...(ctx.job.data as object), resumes: ctx.attempt });
  await ctx.job.moveToDelayed(Date.now(), ctx.token);
  throw new DelayedError();
}

/** What `awaitSignal` answers: the payload once delivered, with who decided it. */
export interface SignalAnswer {
  readonly delivered: boolean;
  readonly payload: unknown;
  /** The signal's full name (an approval's with its nonce). */
  readonly signal: string;
  readonly decidedBy: SignalDecision | null;
}

/**
 * The signal's payload once it has arrived, or `{delivered: false}` once the timeout has passed.
 * Until then the job parks in the delayed set (throws DelayedError) and is promoted by the signal.
 * `wait` names the signal (a wait node's, by its node id) or, with a nonce, an approval's prefix.
 */
export async function awaitSignal(
  ctx: NodeContext,
  wait: Omit<WaitSpec, 'nodeId'>,
  timeoutSeconds: number,
): Promise<SignalAnswer> {
  ownJobFor(ctx, 'wait for a signal');
  const { store } = ctx.deps;
  const runId = ctx.plan.runId;
  const spec: WaitSpec = { nodeId: ctx.node.id, ...wait };
  // A wait never outlives its run's deadline.
  const proposed = Math.min(Date.now() + timeoutSeconds * 1000, ctx.begin.deadlineAt ?? Infinity);
  const live = (until: number): LiveNodeState => ({
    status: 'waiting',
    until: new Date(until).toISOString(),
  });
  const state = await store.waitState(runId, spec, proposed, live(proposed));
  if (state.delivered || Date.now() >= state.deadlineAt) return state;
  // Announced on every entry that finds the wait open (the delivery's id is the same each time).
  await announce(ctx, {
    type: 'run.waiting',
    key: state.signal,
    data: {
      nodeId: ctx.node.id,
      reason: wait.budget ? 'budget' : wait.approval ? 'approval' : 'signal',
      signal: state.signal,
      until: new Date(state.deadlineAt).toISOString(),
      ...(wait.approval ? { approval: wait.approval } : {}),
      ...(wait.budget ? { budget: wait.budget } : {}),
    },
  });
  if (ctx.token === undefined) throw new Error('waiting for a signal needs a worker token to park');
  await markContinuation(ctx);
  await ctx.job.moveToDelayed(state.deadlineAt, ctx.token);
  // A signal that arrived between the check above and the move found no delayed job to promote:
  // look once more, now that the job is parked.
  const again = await store.waitState(runId, spec, state.deadlineAt, live(state.deadlineAt));
  if (again.delivered) await ctx.job.promote().catch(() => undefined);
  throw new DelayedError();
}
