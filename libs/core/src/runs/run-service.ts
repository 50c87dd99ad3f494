/**
 * What a client can do with runs: submit (validated, idempotent), read, cancel, resume, signal,
 * wait and follow events. Used by the HTTP API; holds no process state besides its connections.
 */
import type { RunArchiver } from '../archive/run-archiver.js';
import { metrics } from '../telemetry/metrics.js';
import { randomUUID } from 'node:crypto';
import type { Ceilings, RunBudget } from '../ceilings/ceilings.js';
import { validateGraph } from '../compile/validate.js';
import { raisedBudget } from '../cost/budget-rules.js';
import {
  BudgetDecision,
  isBudgetSignal,
  isTerminal,
  type RunDocument,
  type NodeSnapshot,
  type RerunOf,
  type RunStatus,
  type SignalDecision,
  type SignalLimits,
  type SignalOutcome,
} from '../domain/run-model.js';
import { idempotentRunId } from '../domain/run-id.js';
import { DEFAULT_TENANT } from '../domain/tenant.js';
import { DEFAULT_MAX_WAIT_DAYS, maxRunSeconds } from '../domain/wait-limits.js';
import { cancelledError } from '../errors/run-error.js';
import type { GraphLimits } from '../graph/limits.js';
import type { ValidationIssue } from '../graph/schema.js';
import { MODEL_VARIABLES } from '../model/model-config.js';
import { loopModeGraph } from '../nodes/index.js';
import { enqueueRunRoot, wakeParkedNodes, wakeRunRoot, type RunQueues } from '../queues/run-jobs.js';
import type { RunSearchPage } from '../state/run-index.js';
import type { NewRun } from '../state/runs/run-creation.js';
import type { RunStore } from '../state/runs/run-store.js';
import type { RunSearch } from '../insight/run-search.js';
import { explainRun, readyTimes, type MapItemsInput, type RunExplain } from '../insight/explain.js';
import type { RunEvent, RunOrigin, WindowSettings } from '../domain/run-model.js';
import type { WebhookOutbox } from '../queues/webhook-jobs.js';
import { WebhookStoreError, type WebhookStore } from '../state/webhook-store.js';
import type { ToolRegistry } from '../tools/tool.js';
import type { SkillsRecord } from '../domain/run-model.js';
import { taskBounds, type RunRequest } from './run-request.js';
import { rerunSet, rerunStart } from './rerun-set.js';
import { recordSettledRun } from '../telemetry/run-span.js';

export class GraphRejectedError extends Error {
  constructor(readonly issues: readonly ValidationIssue[]) {
    super(`graph rejected: ${issues.length} problem(s)`);
    this.name = 'GraphRejectedError';
  }
}

/** A request the deployment's ceilings refuse (an agent not declared, or not the tenant's). */
export class RequestRefusedError extends Error {
  constructor(readonly issues: readonly ValidationIssue[]) {
    super(`request refused: ${issues.map((i) => i.message).join('; ')}`);
    this.name = 'RequestRefusedError';
  }
}

/** A request that conflicts with the run's current state (e.g. cancel a finished run). */
export class RunStateConflictError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'RunStateConflictError';
  }
}

export interface SubmitOptions {
  /** The tenant the run belongs to: its ceilings apply. @defaultValue DEFAULT_TENANT */
  readonly tenant?: string;
  /** The run belongs to this session's lane. */
  readonly sessionKey?: string;
  /** False: store the run but let its lane start it later. @defaultValue true */
  readonly start?: boolean;
  readonly runId?: string;
  /**
   * System prompt of a loop-mode agent, made by the caller (a session's run). Without it a
   * loop-mode run is stored unprepared: the plan loop makes its agent's prompt and its graph.
   */
  readonly system?: string;
  /** The skills the caller's `system` holds, recorded on the run. */
  readonly skills?: SkillsRecord;
  /**
   * Steering a loop-mode agent starts with, read before its first turn (a session run woken by an
   * event: the event's delimited block, which it reads as a `session_environment` result).
   */
  readonly steering?: readonly string[];
  /** What started the run when no API call did: a schedule's firing, or a trigger's events. */
  readonly origin?: RunOrigin;
}

export interface SubmitResult {
  readonly runId: string;
  readonly status: RunStatus;
  readonly acceptedAt: string;
  /** False when an earlier request with the same idempotency key created the run. */
  readonly created: boolean;
}

/** What a rerun answers: the new run, and where it came from. */
export interface RerunResult extends SubmitResult {
  readonly rerunOf: RerunOf;
}

export interface RunServiceDeps {
  readonly store: RunStore;
  readonly queues: RunQueues;
  readonly tools: ToolRegistry;
  readonly limits: GraphLimits;
  readonly defaultBudget: RunBudget;
  /** Window mode when the request sets no `window` / `maxWindows`. */
  readonly windowDefaults: WindowSettings;
  /** A run's `maxParallelNodes` when the request sets none (`TETRALOOP_MAX_PARALLEL_NODES`); no cap when unset. */
  readonly maxParallelNodes?: number;
  /**
   * The longest a run may last, its waits included (`TETRALOOP_MAX_WAIT_DAYS`, in seconds): the
   * largest `timeoutSeconds` accepted and the longest wait node. @defaultValue 30 days
   */
  readonly maxRunSeconds?: number;
  /** Whether llm nodes, agents and task runs can run here. */
  readonly modelConfigured: boolean;
  readonly allowedTools: (agentId: string) => ReadonlySet<string>;
  /** Declared agents, tenants' agents and models, budget ceilings. */
  readonly ceilings: Ceilings;
  /** The agents with a workspace folder (they are declared). */
  readonly agentFolders: (fresh?: boolean) => Promise<ReadonlySet<string>>;
  /** Where a queued session run stands in its lane. */
  readonly lanePosition?: (sessionKey: string, runId: string) => Promise<number | null>;
  /** The tenants' signing secrets and delivery attempts; absent: a run's `webhook` is refused. */
  readonly webhooks?: WebhookStore;
  /** Announces runs settled here (cancelled before they started) to their webhooks. */
  readonly outbox?: WebhookOutbox;
  /** Where a run cancelled before it started is archived (`TETRALOOP_ARCHIVE_DIR`); absent: nowhere. */
  readonly archive?: RunArchiver;
  /**
   * The run queues send on the store's own connection to one Redis (not a cluster), so a new run's
   * root job may be added without waiting for its create: Redis runs them in the order sent.
   * @defaultValue false
   */
  readonly rootJobWithCreate?: boolean;
}

export class RunService {
  constructor(private readonly deps: RunServiceDeps) {}

  /**
   * Validates the request (a graph whole) against the ceilings of its tenant and agent, stores the
   * run with its budget and deadline clamped to the ceilings, and enqueues its root job. Nothing
   * runs if anything is invalid. A dag-mode task is stored unplanned; the plan loop plans it.
   */
  async submit(
    request: RunRequest,
    idempotencyKey?: string,
    options: SubmitOptions = {},
  ): Promise<SubmitResult> {
    const { ceilings } = this.deps;
    const tenant = options.tenant ?? DEFAULT_TENANT;
    const validation = await this.validated(request, tenant, options.system);
    // A loop-mode run without a prompt given is prepared where the plugins' hooks run (the plan
    // loop): its graph was validated here, and is made again there with the agent's prompt.
    const prepared = !(request.task !== undefined && request.mode === 'loop' && options.system === undefined);
    if (request.webhook) await this.checkWebhook(tenant);
    // A request with an Idempotency-Key names its run: every repeat computes the same id, and the
    // create script makes the run once and answers it to everyone else (one tenant's key never
    // finds another tenant's run: the tenant is part of the id).
    const runId =
      options.runId ??
      (idempotencyKey !== undefined ? idempotentRunId(tenant, idempotencyKey) : randomUUID());
    const topology = prepared ? validation?.topology : undefined;
    const maxParallelNodes = request.maxParallelNodes ?? this.deps.maxParallelNodes;
    const run: NewRun = {
      runId,
      ...(validation && prepared ? { graph: validation.graph, plan: validation.plan } : {}),
      ...(request.task !== undefined
        ? {
            task: {
              mode: request.mode,
              task: request.task,
              agentId: request.agentId,
              tenant,
              ...taskBounds(request, this.deps.windowDefaults),
              ...(request.overrides ? { overrides: request.overrides } : {}),
              ...(request.model !== undefined ? { model: request.model } : {}),
              ...(request.thinking !== undefined ? { thinking: request.thinking } : {}),
              ...(request.secrets?.length ? { secrets: request.secrets } : {}),
              ...(request.mode === 'loop' ? { maxIterations: request.maxIterations } : {}),
            },
          }
        : {}),
      ...(options.skills ? { skills: options.skills } : {}),
      agentId: request.agentId,
      tenant,
      ...(options.sessionKey ? { sessionKey: options.sessionKey } : {}),
      input: request.input,
      timeoutSeconds: ceilings.clampTimeout(request.timeoutSeconds),
      budget: ceilings.clampBudget({ ...this.deps.defaultBudget, ...request.budget }),
      onBudget: request.onBudget,
      metadata: request.metadata,
      priority: request.priority,
      ...(maxParallelNodes !== undefined ? { maxParallelNodes } : {}),
      ...(request.tags ? { tags: request.tags } : {}),
      ...(request.webhook ? { webhook: request.webhook } : {}),
      ...(options.origin ? { origin: options.origin } : {}),
      ...(options.steering?.length ? { steering: options.steering } : {}),
      createdAt: new Date().toISOString(),
      pending: new Map(topology?.ids.map((id) => [id, topology.parents.get(id)?.length ?? 0]) ?? []),
    };
    // A new id (no Idempotency-Key, none given) is a run this request creates, so its root job does
    // not wait for the create's answer: on one connection to one Redis the add follows the create
    // and Redis runs them in that order, one round trip instead of two. The answer still waits for
    // both. Should the create fail, the add's job finds no run and ends (`gone`).
    const fresh = idempotencyKey === undefined && options.runId === undefined;
    if (this.deps.rootJobWithCreate && fresh && options.start !== false) {
      const [stored] = await Promise.all([this.deps.store.create(run), this.enqueueRoot(runId, 0)]);
      return { runId, status: stored.status, acceptedAt: stored.createdAt, created: stored.created };
    }
    const stored = await this.deps.store.create(run);
    // A repeat (or the first request itself, retried after a crash) adds the root job of a run that
    // is still queued: its id derives from the run, so this adds nothing when the job exists.
    if (stored.status === 'queued' && options.start !== false) await this.enqueueRoot(runId, 0);
    return { runId, status: stored.status, acceptedAt: stored.createdAt, created: stored.created };
  }

  /**
   * Checks a request as `submit` does and stores nothing: what a schedule or a trigger holds is
   * refused when it is made, not at its first firing. Throws as `submit` does. `inputKnown: false`
   * for an input filled in only when it fires (a trigger's, from its events): its `input.*`
   * references are then checked at each firing.
   */
  async check(
    request: RunRequest,
    options: Pick<SubmitOptions, 'tenant'> & { readonly inputKnown?: boolean } = {},
  ): Promise<void> {
    const tenant = options.tenant ?? DEFAULT_TENANT;
    await this.validated(request, tenant, undefined, options.inputKnown ?? true);
    if (request.webhook) await this.checkWebhook(tenant);
  }

  /**
   * The request checked against the ceilings of its tenant and agent, and its graph (given, or the
   * loop-mode one) validated whole; undefined for a task the plan loop plans later.
   */
  private async validated(request: RunRequest, tenant: string, system?: string, inputKnown = true) {
    const { ceilings } = this.deps;
    await this.checkAgent(tenant, request.agentId);
    const allowedTools = this.deps.allowedTools(request.agentId);
    if (request.task !== undefined && !this.deps.modelConfigured) {
      throw new GraphRejectedError([
        { path: 'task', message: `no model is configured: set ${MODEL_VARIABLES}` },
      ]);
    }
    this.checkModel(tenant, request);
    this.checkTimeout(request.timeoutSeconds);
    const taskPlansLater = request.task !== undefined && request.mode !== 'loop';
    const graph =
      request.task !== undefined && request.mode === 'loop'
        ? loopModeGraph(request.task, [...allowedTools], request.maxIterations, system, {
            ...(request.model !== undefined ? { model: request.model } : {}),
            ...(request.thinking !== undefined ? { thinking: request.thinking } : {}),
            secrets: this.grantOf(request),
          })
        : request.graph;
    const validation = taskPlansLater
      ? undefined
      : validateGraph(graph, {
          tools: this.deps.tools,
          limits: this.deps.limits,
          modelConfigured: this.deps.modelConfigured,
          allowedTools,
          models: ceilings.models(tenant, request.agentId),
          ...(inputKnown ? { input: { value: request.input } } : {}),
          maxWaitMs: this.maxRunSeconds * 1000,
        });
    if (validation && !validation.ok) {
      throw new GraphRejectedError(validation.issues.map((i) => ({ ...i, path: join('graph', i.path) })));
    }
    return validation;
  }

  private get maxRunSeconds(): number {
    return this.deps.maxRunSeconds ?? maxRunSeconds(DEFAULT_MAX_WAIT_DAYS);
  }

  /**
   * Refuses (RequestRefusedError at `timeoutSeconds`) a deadline past the longest a run may last
   * here. Not clamped like a ceiling: a run asking to wait longer than the deployment allows would
   * otherwise be cut off silently, weeks later.
   */
  private checkTimeout(timeoutSeconds: number): void {
    const max = this.maxRunSeconds;
    if (timeoutSeconds <= max) return;
    throw new RequestRefusedError([
      {
        path: 'timeoutSeconds',
        message: `must be at most ${max} (${max / 86_400} days, TETRALOOP_MAX_WAIT_DAYS)`,
      },
    ]);
  }

  /** The secrets a task run grants what a model writes for it: the request's and the agent's declared ones. */
  private grantOf(request: Pick<RunRequest, 'secrets' | 'agentId'>): string[] {
    return [...new Set([...(request.secrets ?? []), ...this.deps.ceilings.agentSecrets(request.agentId)])];
  }

  /**
   * A run's own `webhook` is signed with its tenant's signing secret, so the tenant must have one
   * before it asks: a run is refused rather than given deliveries no one could verify.
   */
  private async checkWebhook(tenant: string): Promise<void> {
    const store = this.deps.webhooks;
    if (!store) throw new WebhookStoreError('secrets_off', 'this deployment sends no webhooks');
    if (!(await store.hasSigningSecret(tenant))) {
      throw new WebhookStoreError(
        'webhook_secret_missing',
        'the tenant has no webhook signing secret: make one with POST /v1/webhooks/secret, then submit again',
      );
    }
  }

  /**
   * Refuses (RequestRefusedError at `model`) a run's `model` that the deployment, the tenant or
   * the agent does not allow.
   */
  checkModel(tenant: string, request: Pick<RunRequest, 'model' | 'agentId'>): void {
    if (request.model === undefined) return;
    const refused = this.deps.ceilings.runModelRefusal(tenant, request.agentId, request.model);
    if (refused !== undefined) throw new RequestRefusedError([{ path: 'model', message: refused }]);
  }

  /**
   * Refuses (RequestRefusedError at `agentId`) an agent that is not declared while agents are
   * declared, or that `tenant` may not run.
   */
  /** The agents `tenant` may run by name (see `Ceilings.agentsFor`); `fallback` when none is declared. */
  async agents(tenant: string, fallback: string): Promise<string[]> {
    return this.deps.ceilings.agentsFor(tenant, await this.deps.agentFolders(), fallback);
  }

  async checkAgent(tenant: string, agentId: string): Promise<void> {
    const { ceilings, agentFolders } = this.deps;
    // The folders may be a cached read: a refusal is made only on a fresh one.
    let refused = ceilings.agentRefusal(tenant, agentId, await agentFolders());
    if (refused !== undefined) refused = ceilings.agentRefusal(tenant, agentId, await agentFolders(true));
    if (refused !== undefined) throw new RequestRefusedError([{ path: 'agentId', message: refused }]);
  }

  private enqueueRoot(runId: string, generation: number): Promise<void> {
    return enqueueRunRoot(this.deps.queues, runId, generation);
  }

  /** The run's status, or null for an unknown run. */
  status(runId: string): Promise<RunStatus | null> {
    return this.deps.store.status(runId);
  }

  /** Whether the run has settled, or null for an unknown run. */
  settled(runId: string): Promise<boolean | null> {
    return this.deps.store.settledState(runId);
  }

  async get(runId: string): Promise<RunDocument | null> {
    const doc = await this.deps.store.document(runId);
    // A session run waiting in its lane says where it stands.
    if (doc?.sessionKey && doc.status === 'queued' && this.deps.lanePosition) {
      doc.lanePosition = await this.deps.lanePosition(doc.sessionKey, runId);
    }
    // Its own webhook's delivery attempts are kept with the tenant's webhooks.
    if (doc?.webhook && this.deps.webhooks)
      doc.webhook.deliveries = await this.deps.webhooks.deliveries(doc.tenant, { runId });
    return doc;
  }

  /** One page of the tenant's runs that pass every filter of `search`, newest first. */
  search(tenant: string, search: RunSearch): Promise<RunSearchPage> {
    return this.deps.store.index.search(tenant, search);
  }

  /**
   * Where the run's time went (see `insight/explain.ts`): its document, its plan's edges and when
   * each node became ready (its `node.queued` events). Null for an unknown run.
   */
  async explain(runId: string, now = Date.now()): Promise<RunExplain | null> {
    const [document, stored] = await Promise.all([
      this.deps.store.document(runId),
      this.deps.store.plan(runId),
    ]);
    if (!document) return null;
    const events: RunEvent[] = [];
    for (let after = 0; ;) {
      const page = await this.deps.store.events(runId, after, EVENT_PAGE);
      events.push(...page.filter((e) => e.type === 'node.queued'));
      if (page.length < EVENT_PAGE) break;
      after = page.at(-1)!.seq;
    }
    return explainRun({
      document,
      plan: { ids: stored?.plan.nodes.map((n) => n.id) ?? [], edges: stored?.plan.edges ?? [] },
      readyAt: readyTimes(events),
      now,
      maps: await this.mapItems(runId, stored?.plan.nodes.filter((n) => n.kind === 'map') ?? []),
    });
  }

  /** The concurrency and item snapshots of each map node that started its items, for `explain`. */
  private async mapItems(
    runId: string,
    maps: readonly { id: string }[],
  ): Promise<Map<string, MapItemsInput>> {
    const found = new Map<string, MapItemsInput>();
    for (const { id } of maps) {
      const state = await this.deps.store.mapState(runId, id);
      if (!state) continue;
      const items = await this.deps.store.itemSnapshots(runId, id, state.total);
      found.set(id, { concurrency: state.concurrency, startedAt: state.startedAt, items });
    }
    return found;
  }

  /** Starts a stored run that was held back (a session run whose turn has come). */
  start(runId: string): Promise<void> {
    return this.enqueueRoot(runId, 0);
  }

  /** Ends a run that never started: cancelled, with every node marked so, settled at once. */
  async cancelUnstarted(runId: string, reason: string): Promise<void> {
    const ended = await this.deps.store.endUnstarted(runId, cancelledError(reason), new Date().toISOString());
    if (ended.settled) await recordSettledRun(this.deps.store, runId);
    // No root job will settle it: it is announced (and archived) here; a repeat does it again.
    await this.deps.outbox?.runFinished(runId);
    await this.deps.archive?.archiveRun(runId);
  }

  /**
   * Cancels a run that has not finished: its status becomes `cancelled` at once, running nodes are
   * aborted, nothing else starts. Null for an unknown run.
   */
  async cancel(runId: string): Promise<{ status: RunStatus } | null> {
    const status = await this.deps.store.status(runId);
    if (status === null) return null;
    if (!isTerminal(status)) {
      const decided = await this.deps.store.decideError(
        runId,
        cancelledError('cancelled by request'),
        new Date().toISOString(),
      );
      if (decided) await wakeParkedNodes(this.deps.store, this.deps.queues, runId);
      // A queued run may be waiting for a running slot of its tenant, its root job parked.
      if (decided && status === 'queued')
        await wakeRunRoot(this.deps.queues, runId, await this.deps.store.generation(runId));
    }
    const after = (await this.deps.store.status(runId)) ?? 'cancelled';
    if (after !== 'cancelled')
      throw new RunStateConflictError('run_finished', `the run already ended as ${after}`);
    if (!isTerminal(status)) metrics.runActions.inc({ action: 'cancel' });
    return { status: after };
  }

  /**
   * Forks a settled run from one of its nodes: a new run (a new id, the caller's tenant's) of the
   * same plan, input, budget and deadline, that starts with the origin's snapshots of every node
   * not downstream of `from` that succeeded, and runs `from`, everything downstream of it (and any
   * node that did not succeed) again. Its document names its origin (`rerunOf`). The graph is
   * checked again against today's ceilings. Null for an unknown run or another tenant's.
   */
  async rerun(
    originId: string,
    from: string,
    options: { tenant: string; idempotencyKey?: string | undefined },
  ): Promise<RerunResult | null> {
    const { store, ceilings } = this.deps;
    const { tenant } = options;
    const [origin, header] = await Promise.all([store.document(originId), store.header(originId)]);
    if (!origin || origin.tenant !== tenant) return null;
    if (origin.graph === null) {
      throw new RunStateConflictError(
        'not_rerunnable',
        'the run has no plan: it was never planned, so no node ran',
      );
    }
    if (origin.finishedAt === null) {
      throw new RunStateConflictError(
        'not_rerunnable',
        `the run has not settled yet (it is ${origin.status}); rerun it once it has`,
      );
    }
    await this.checkAgent(tenant, origin.agentId);
    const allowedTools = this.deps.allowedTools(origin.agentId);
    const validation = validateGraph(origin.graph, {
      tools: this.deps.tools,
      limits: this.deps.limits,
      modelConfigured: this.deps.modelConfigured,
      allowedTools,
      models: ceilings.models(tenant, origin.agentId),
      input: { value: origin.input },
      maxWaitMs: this.maxRunSeconds * 1000,
      // A planned graph is held to today's grant: what the origin asked for, and what its agent
      // declares now (a secret taken off the agent is not replayed by a rerun).
      ...(header.task
        ? { secrets: new Set(this.grantOf({ ...header.task, secrets: [...(header.task.secrets ?? [])] })) }
        : {}),
    });
    if (!validation.ok) {
      throw new GraphRejectedError(validation.issues.map((i) => ({ ...i, path: join('graph', i.path) })));
    }
    const start = rerunStart(validation.plan, from);
    if (start === undefined) {
      throw new RequestRefusedError([
        { path: 'from', message: `the run has no node "${from}" (its document's nodes are its ids)` },
      ]);
    }
    const { rerun, pending } = rerunSet(
      validation.plan,
      (id) => id !== start && origin.nodes[id]?.status === 'succeeded',
    );
    const again = new Set(rerun);
    const reused = new Map<string, NodeSnapshot>();
    for (const node of validation.plan.nodes) {
      const view = origin.nodes[node.id];
      if (again.has(node.id) || view?.status !== 'succeeded') continue;
      const { id: _id, waits: _waits, throttledMs: _throttled, ...snapshot } = view;
      reused.set(node.id, snapshot);
    }
    const timeoutSeconds = ceilings.clampTimeout(origin.timeoutSeconds);
    // The blobs behind the reused outputs live at least as long as the new run.
    await store.blobs.retain(
      tenant,
      [...reused.values()].map((s) => s.output),
      timeoutSeconds,
    );
    const runId =
      options.idempotencyKey !== undefined ? idempotentRunId(tenant, options.idempotencyKey) : randomUUID();
    const rerunOf: RerunOf = { runId: originId, from };
    const task = header.task;
    const stored = await store.create({
      runId,
      graph: validation.graph,
      plan: validation.plan,
      ...(task
        ? {
            task: {
              task: task.task,
              mode: task.mode,
              agentId: task.agentId,
              tenant,
              maxReplans: task.maxReplans,
              ...(task.window ? { window: task.window } : {}),
              ...(task.overrides ? { overrides: task.overrides } : {}),
              // A rerun that replans may use what its origin was granted, and nothing more.
              ...(task.secrets?.length ? { secrets: task.secrets } : {}),
            },
          }
        : {}),
      agentId: origin.agentId,
      tenant,
      input: origin.input,
      timeoutSeconds,
      budget: ceilings.clampBudget({ ...this.deps.defaultBudget, ...origin.budget }),
      metadata: origin.metadata ?? undefined,
      priority: origin.priority,
      tags: origin.tags,
      createdAt: new Date().toISOString(),
      pending,
      rerun: { of: rerunOf, reused },
    });
    if (stored.status === 'queued') await this.enqueueRoot(runId, 0);
    return { runId, status: stored.status, acceptedAt: stored.createdAt, created: stored.created, rerunOf };
  }

  /**
   * Re-runs a failed or timed_out run from its snapshots: nodes that succeeded are kept; nodes
   * that did not, and everything downstream of them, run again along the same graph.
   */
  async resume(runId: string): Promise<{ status: RunStatus; generation: number } | null> {
    const stored = await this.deps.store.plan(runId);
    if (!stored) return null;
    const snapshots = await this.deps.store.snapshots(runId);
    const { rerun, pending } = rerunSet(stored.plan, (id) => snapshots.get(id)?.status === 'succeeded');
    const result = await this.deps.store.resume(runId, rerun, pending, stored.timeoutSeconds);
    if (!result.resumed) {
      throw new RunStateConflictError(
        'not_resumable',
        result.status === 'settling'
          ? 'the run is still settling; retry in a moment'
          : `only failed or timed_out runs can be resumed; this one is ${result.status}`,
      );
    }
    metrics.runActions.inc({ action: 'resume' });
    // The blobs of the kept snapshots live at least as long as the reopened run's keys.
    const again = new Set(rerun);
    const kept = [...snapshots].filter(([id]) => !again.has(id)).map(([, s]) => s.output);
    await this.deps.store.blobs.retain(stored.tenant, kept, stored.timeoutSeconds);
    await this.enqueueRoot(runId, result.generation);
    return { status: 'queued', generation: result.generation };
  }

  /**
   * Delivers a named signal to a run, if something may take it: a wait that has begun and is not
   * over (a wait node, a held tool call's approval, a budget decision), or a wait node that
   * declares the name with `acceptEarly`. Waiting nodes for that name are woken at once. `decision`
   * (who decided, when) is recorded with it; `limits` cap the payload's size and how many signals
   * the run keeps. A budget decision's payload must be a {@link BudgetDecision} (a ZodError
   * otherwise); a raise, held to the money budget ceiling, is applied in the same step.
   */
  async signal(
    runId: string,
    name: string,
    payload: unknown,
    decision: SignalDecision,
    limits: SignalLimits,
  ): Promise<SignalOutcome> {
    const bytes = Buffer.byteLength(JSON.stringify(payload ?? null));
    if (bytes > limits.maxBytes) {
      return {
        outcome: 'refused',
        code: 'signal_too_large',
        message: `the signal's payload is ${bytes} bytes; at most ${limits.maxBytes} are accepted`,
        limit: limits.maxBytes,
      };
    }
    const budget = isBudgetSignal(name) ? BudgetDecision.parse(payload) : undefined;
    const raiseTo =
      budget?.costUsd === undefined
        ? undefined
        : raisedBudget(undefined, budget.costUsd, this.deps.ceilings.maxCostUsd());
    const result = await this.deps.store.signal(
      runId,
      name,
      payload,
      decision,
      limits.maxPerRun,
      raiseTo === undefined ? undefined : { costUsd: raiseTo },
    );
    switch (result) {
      case 'delivered':
        // Waiting nodes wake and look for their signal; those waiting for another name park again.
        await wakeParkedNodes(this.deps.store, this.deps.queues, runId, ['waiting']);
        return { outcome: 'delivered' };
      case 'duplicate':
      case 'unknown_run':
        return { outcome: result };
      case 'run_finished': {
        const status = await this.deps.store.status(runId);
        return { outcome: 'refused', code: 'run_finished', message: `the run already ended as ${status}` };
      }
      case 'not_awaited':
        return {
          outcome: 'refused',
          code: 'signal_not_awaited',
          message: `nothing in the run waits for "${name}" now, and no wait node declares it with acceptEarly`,
        };
      case 'too_many':
        return {
          outcome: 'refused',
          code: 'too_many_signals',
          message: `the run has accepted its ${limits.maxPerRun} signals`,
          limit: limits.maxPerRun,
        };
      case 'not_raised': {
        const now = (await this.deps.store.budget(runId)).costUsd;
        const ceiling = this.deps.ceilings.maxCostUsd();
        return {
          outcome: 'refused',
          code: 'budget_not_raised',
          message:
            `the run's money budget is $${now} already: a raise must be above it` +
            (ceiling === undefined ? '' : ` (raises are held to $${ceiling}, TETRALOOP_BUDGET_MAX_COST_USD)`),
        };
      }
    }
  }
}

/** Events read at a time when a run's stream is read whole. */
const EVENT_PAGE = 1000;

const join = (head: string, tail: string): string => (tail ? `${head}.${tail}` : head);
