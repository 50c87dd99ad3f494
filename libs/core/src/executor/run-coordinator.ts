/**
 * The run's root job, in the plan queue (L2). First pass: plan the run if it is a task, start it,
 * enqueue the nodes that are ready, then park in waiting-children. Second pass,
 * once every child is done: replan if a node asked for it, else decide the outcome from the
 * snapshots and settle the run (`run-settle.ts`). A run that runs too long is ended by the sweep of
 * the run deadlines (`run-deadlines.ts`).
 */
import { DelayedError, WaitingChildrenError, type Job } from 'bullmq';
import { isDeepStrictEqual } from 'node:util';
import {
  DEFAULT_LOOP_ITERATIONS,
  type NodeSnapshot,
  type RunStatus,
  type UsageCharge,
} from '../domain/run-model.js';
import { toErrorData, type NodeErrorData } from '../errors/node-error.js';
import type { RunError } from '../errors/run-error.js';
import { buildTopology } from '../graph/topology.js';
import { planRun } from '../planning/plan-run.js';
import { planWindow } from '../planning/plan-window.js';
import { DeadlineJobData, JOB, RunJobData, type RunJobData as RunJobInput } from '../queues/catalog.js';
import { enqueueCycleBudget, enqueueRunRoot } from '../queues/run-jobs.js';
import type { OutcomeState, RunHeader, TaskState } from '../state/runs/run-read-model.js';
import { validateGraph } from '../compile/validate.js';
import { Thinking } from '../model/thinking.js';
import { loopModeGraph } from '../nodes/index.js';
import { agentPrompt } from '../planning/agent-prompt.js';
import type { PlanningDeps } from '../planning/plan-run.js';
import type { WindowState } from '../state/runs/run-plan.js';
import { metrics } from '../telemetry/metrics.js';
import { recordSettledRun, underRunSpan } from '../telemetry/run-span.js';
import { inSpan, tracingOn } from '../telemetry/tracing.js';
import { admitRun, releaseRun } from './run-admission.js';
import type { ExecutorDeps } from './deps.js';
import { releasesDependents } from './node-executor.js';
import { carryWidthFor, enqueueStart } from './carrier-job.js';
import { dailyCapReached, plannerCharge } from './model-cost.js';
import { endPastDeadline } from './run-deadlines.js';
import { afterSettled, agentEnded, finalizeRun, remember } from './run-settle.js';
import { nowIso } from '../domain/clock.js';
import type { CompiledPlan } from './plan-cache.js';

export interface RunJobResult {
  readonly status: RunStatus | 'gone' | 'stale' | 'replanned';
}

/** Processor of the plan queue: root jobs (and deadline jobs older processes added). */
export async function executePlanJob(
  deps: ExecutorDeps,
  job: Job,
  token: string | undefined,
): Promise<RunJobResult> {
  if (job.name === JOB.deadline) return fireDeadline(deps, job);
  if (job.name === JOB.cycle) return fireCycleBudget(deps, job);
  const data = RunJobData.parse(job.data);
  // Each pass of the root job (`start`, then `finalize` once every node is done) is a span under
  // the run's `invoke_agent` span, in the trace the run was created in (stored with the run: a
  // resumed run's root job was enqueued in another trace), linked to what enqueued the job. A
  // root job added beside the create may run before the create has landed: then the job's own
  // context is the one the run is being created in.
  const created = tracingOn()
    ? (((await deps.store.traceFacts(data.runId)) ?? { created: data.trace }).created ?? undefined)
    : undefined;
  return inSpan(
    `run ${data.step}`,
    {
      ...underRunSpan(data.runId, created, data.trace),
      attributes: {
        'tetraloop.run.id': data.runId,
        'tetraloop.generation': data.generation,
        'tetraloop.run.step': data.step,
      },
      expected: (err) => err instanceof DelayedError || err instanceof WaitingChildrenError,
    },
    () => executeRunJob(deps, job, token),
  );
}

/**
 * Settles the run of a root job that failed for good — it stalled more often than
 * TETRALOOP_MAX_STALLED_COUNT allows, or threw on every attempt — as its finalize pass would have:
 * from its snapshots, nodes that never completed making it `node_lost`. Nothing else would settle
 * it: its deadline only decides it. A run that is still queued is left to the reconciler, which
 * replaces a failed root job; a run already settled, and any other job, is ignored. Returns the
 * run's status, or null when it did nothing. Safe to repeat.
 */
export async function settleAfterRootFailure(deps: ExecutorDeps, job: Job): Promise<RunStatus | null> {
  if (job.name !== JOB.run) return null;
  const data = RunJobData.safeParse(job.data);
  if (!data.success) return null;
  const { runId, generation } = data.data;
  // One read for the common case, a run settled already (the reconciler's pass meets many). One
  // its last node's job settled still needs the archive, which that job leaves to the root job.
  const settled = await deps.store.settledState(runId);
  if (settled === true) await deps.archive?.archiveRun(runId);
  if (settled !== false) return null;
  if ((await deps.store.status(runId)) === 'queued') return null;
  // A root job of an older generation (the run was resumed since) speaks for nothing now.
  if ((await deps.store.generation(runId)) !== generation) return null;
  const plan = await deps.plans.get(runId, generation);
  if (!plan) return null;
  return finalizeRun(deps, plan, generation, await deps.store.outcomeState(runId));
}

/** Failed root jobs each reconcile pass looks at, per shard: the newest. */
const FAILED_ROOTS_PER_PASS = 100;

/**
 * The reconciler's pass over root jobs that failed for good: settles the runs of those still
 * unsettled, as the plan pool's `failed` listener does when it sees the failure. That listener's
 * retries live in its process; if it stopped first, the run is settled here, at the next pass of
 * whichever plan worker runs the reconciler. Looks at the newest failed jobs of each shard's plan
 * queue. Answers how many runs it settled.
 */
export async function settleFailedRoots(deps: ExecutorDeps): Promise<number> {
  let settled = 0;
  for (const shard of deps.queues.shards) {
    for (const job of await shard.plan.getFailed(0, FAILED_ROOTS_PER_PASS - 1)) {
      if ((await settleAfterRootFailure(deps, job)) !== null) settled += 1;
    }
  }
  return settled;
}

async function executeRunJob(deps: ExecutorDeps, job: Job, token: string | undefined): Promise<RunJobResult> {
  const data = RunJobData.parse(job.data);
  // Read once in the start pass: status, session and task. The plan is asked for beside it, in the
  // same round trip: a graph run has it already (a task run not yet planned reads null here and
  // asks again once planned).
  const [header, prefetched] =
    data.step === 'start'
      ? await Promise.all([deps.store.header(data.runId), deps.plans.get(data.runId, data.generation)])
      : [null, null];
  if (header) {
    // Past its tenant's cap of running runs, the run waits queued (the job parks) for a slot.
    await admitRun(deps, job, token, data.runId, header);
    // Recorded on the run once, and the version the first plan is made from.
    const envVersion =
      data.generation === 0 && header.sessionKey
        ? await environmentVersionOf(deps, data.runId, header.sessionKey)
        : 0;
    const starting = data.generation === 0 ? await agentStarting(deps, data.runId, header) : header;
    const planned = await ensurePlanned(deps, data.runId, starting, envVersion);
    if (planned !== 'ready') return { status: planned };
  }
  const plan = prefetched ?? (await deps.plans.get(data.runId, data.generation));
  if (!plan) return { status: 'gone' };

  if (data.step === 'start') {
    // A new run has no snapshots yet, unless it is a rerun that starts with its origin's.
    const snapshots =
      data.generation === 0 && !plan.reusesSnapshots
        ? new Map<string, NodeSnapshot>()
        : await deps.store.snapshots(plan.runId);
    const ready = readyNodes(plan, snapshots);
    const started = await deps.store.start(
      plan.runId,
      data.generation,
      ready,
      Date.now() + plan.timeoutSeconds * 1000,
      nowIso(),
      carryWidthFor(deps, plan, data.generation, ready),
    );
    if (started.status === 'stale') return { status: 'stale' };
    if (started.status === 'running') {
      // Side by side: a redelivered start pass adds them again (their job ids are fixed), so
      // none needs another to have landed first. All are settled before a failure is thrown, so
      // nothing of this pass is still in flight when the job fails. The run's deadline needs no
      // job: `start-run` put it among the run deadlines the plan pool sweeps (run-deadlines.ts).
      // A window's cycle budget (window mode) starts with the window.
      const cycleBudgetMs = header?.task?.window?.cycleBudgetMs;
      const added = await Promise.allSettled([
        enqueueStart(deps, plan, ready, data.generation, started.carryWidth),
        ...(cycleBudgetMs
          ? [enqueueCycleBudget(deps.queues, plan.runId, data.generation, cycleBudgetMs)]
          : []),
      ]);
      for (const result of added) if (result.status === 'rejected') throw result.reason;
      if (data.generation === 0) metrics.runsStarted.inc({ kind: header?.task?.mode ?? 'graph' });
    }
    await job.updateData({ ...data, step: 'finalize' } satisfies RunJobInput);
  }
  // Every pass waits while node jobs are pending, the finalize pass too: one that runs again after
  // a crash or a stall (the job's step already `finalize`, its nodes still queued or running)
  // would otherwise settle the run with those nodes `node_lost`. With none pending, it goes on.
  if (token !== undefined && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError();
  // Settled already by the node job whose completion decided it: what follows, unless that job got
  // through it (then only the archive, left to this pass).
  const facts = await deps.store.settleFacts(plan.runId);
  if (facts.settled) {
    if (facts.followedUp) await deps.archive?.archiveRun(plan.runId);
    else await afterSettled(deps, plan, facts);
    return { status: facts.status ?? 'gone' };
  }
  let state = await deps.store.outcomeState(plan.runId);
  if (state.mode === 'window' && state.status === 'running' && !state.replanRequested) {
    state = await windowDrained(deps, plan, data.generation, state);
  }
  if (state.replanRequested) {
    if (await replanIfRequested(deps, plan, data.generation, state.snapshots)) return { status: 'replanned' };
    state = await deps.store.outcomeState(plan.runId);
  }
  return { status: await finalizeRun(deps, plan, data.generation, state) };
}

/**
 * A task run gets its plan here, once. A plan that fails validation twice (plan, then one repair)
 * ends the run `failed` with `plan_rejected` and every problem; nothing runs from it.
 */
async function ensurePlanned(
  deps: ExecutorDeps,
  runId: string,
  header: RunHeader,
  envVersion: number,
): Promise<'ready' | 'gone' | RunStatus> {
  const { store } = deps;
  const { task, status } = header;
  if (!task || task.planned) return 'ready';
  if (status === null) return 'gone';
  if (status !== 'queued') return settleUnplanned(deps, runId);
  if (!deps.planning) throw new Error('this process cannot plan task runs');
  if (task.mode === 'loop') return prepareLoopRun(deps, deps.planning, runId, header, task);
  // A tenant past its daily cap on model spending gets no planner call either.
  const capped = await dailyCapReached(deps, header.tenant);
  if (capped)
    return rejectPlan(deps, runId, { code: 'budget_exhausted', message: capped.message, cause: capped });
  const stored = await store.plan(runId);
  const input = stored ? stored.input : (await store.document(runId))?.input;
  let result: Awaited<ReturnType<typeof planRun>>;
  // A cancel (or any other end) published while the planner is asked aborts the call.
  const tracked = deps.aborts.track(runId);
  try {
    // Looked at again once tracked, so an end published since the header was read is not missed.
    const current = await store.status(runId);
    if (current === null) return 'gone';
    if (current !== 'queued') return settleUnplanned(deps, runId);
    const first = {
      planVersion: 0,
      environmentVersion: envVersion,
      signal: tracked.signal,
      tenant: header.tenant,
    };
    result =
      task.mode === 'window' && task.window
        ? await planWindow(deps.planning, task, input, { ...first, settings: task.window })
        : await planRun(deps.planning, task, input, { ...first, runId });
  } catch (err) {
    if (tracked.signal.aborted) {
      return settleUnplanned(deps, runId);
    }
    // The planner could not be asked (after its retries): the run fails now rather than retrying forever.
    const error = toErrorData(err);
    return rejectPlan(deps, runId, {
      code: 'plan_failed',
      message: `the planner call failed: ${error.message}`,
      cause: error,
    });
  } finally {
    tracked.release();
  }
  if ('error' in result) {
    return rejectPlan(deps, runId, { code: 'plan_rejected', message: result.error });
  }
  const { outcome, planning, cache } = result;
  const charge = await plannerCharge(
    deps,
    { tenant: header.tenant, agentId: task.agentId, sessionKey: header.sessionKey },
    outcome,
  );
  if (!outcome.ok) {
    await store.charge(runId, charge);
    return rejectPlan(deps, runId, {
      code: 'plan_rejected',
      message: `the plan was rejected: ${outcome.issues.length} problem(s)`,
      issues: [...outcome.issues],
    });
  }
  const pending = new Map(
    outcome.topology.ids.map((id) => [id, outcome.topology.parents.get(id)?.length ?? 0]),
  );
  await store.setPlan(runId, { graph: outcome.graph, plan: outcome.plan, pending }, planning, charge, cache);
  deps.logger.info({ runId, nodes: outcome.plan.nodes.length, cache: planning.cache }, 'task planned');
  return 'ready';
}

/**
 * A loop-mode run submitted without a prompt (outside a session) gets it here, where the plugins'
 * hooks run: the agent's prompt made as a session run's is (`agentPrompt`: skills, bootstrap files,
 * lessons, the request's overrides and hooks' context), then its one agent loop over the task.
 */
async function prepareLoopRun(
  deps: ExecutorDeps,
  planning: PlanningDeps,
  runId: string,
  header: RunHeader,
  task: TaskState,
): Promise<'ready' | RunStatus> {
  const { agentId } = task;
  const prompt = await agentPrompt(
    { ...planning, logger: deps.logger },
    { agentId, tenant: header.tenant, runId, overrides: task.overrides ? [task.overrides] : [] },
  );
  const allowed = planning.allowedTools(agentId);
  const thinking = Thinking.safeParse(task.thinking);
  // The run grants what its agent's model writes the request's secrets and the agent's declared ones.
  const secrets = [
    ...new Set([...(task.secrets ?? []), ...(planning.ceilings?.agentSecrets(agentId) ?? [])]),
  ];
  const graph = loopModeGraph(
    task.task,
    [...allowed],
    task.maxIterations ?? DEFAULT_LOOP_ITERATIONS,
    prompt.system,
    {
      ...(task.model !== undefined ? { model: task.model } : {}),
      ...(thinking.success && thinking.data !== undefined ? { thinking: thinking.data } : {}),
      secrets,
    },
  );
  const validation = validateGraph(graph, {
    tools: planning.tools,
    limits: planning.limits,
    modelConfigured: planning.model !== undefined,
    allowedTools: allowed,
    ...(planning.ceilings ? { models: planning.ceilings.models(header.tenant, agentId) } : {}),
  });
  if (!validation.ok) {
    return rejectPlan(deps, runId, {
      code: 'plan_rejected',
      message: `the agent's graph was rejected: ${validation.issues.map((i) => i.message).join('; ')}`,
      issues: [...validation.issues],
    });
  }
  const { topology } = validation;
  const pending = new Map(topology.ids.map((id) => [id, topology.parents.get(id)?.length ?? 0]));
  await deps.store.setPrepared(
    runId,
    { graph: validation.graph, plan: validation.plan, pending },
    prompt.skills,
  );
  return 'ready';
}

/** What a run request's `overrides` may hold (its `MAX_TASK_CHARS`). */
const MAX_OVERRIDES_CHARS = 200_000;

/**
 * `before_agent_start` for a run outside a session (a session run's fires where its prompt is
 * made, in `SessionService`), as it starts; not for a child run. A task run gets the hooks'
 * `context` answers among its runtime overrides: a dag-mode run's planner's, a loop-mode run's
 * agent's prompt. Answers the header to plan with.
 */
async function agentStarting(deps: ExecutorDeps, runId: string, header: RunHeader): Promise<RunHeader> {
  const hooks = deps.hooks.registry;
  if (!hooks?.has('before_agent_start') || header.sessionKey || header.parentRunId) return header;
  if (header.status !== 'queued') return header;
  const { task } = header;
  const { results } = await hooks.run(
    'before_agent_start',
    { runId, agentId: header.agentId, task: task?.task ?? '' },
    (c) => c,
  );
  const context = results.flatMap((r) => (r.context ? [r.context] : []));
  if (!task || task.planned || context.length === 0) return header;
  const overrides = [task.overrides, ...context].filter((t): t is string => !!t).join('\n\n');
  return { ...header, task: { ...task, overrides: overrides.slice(0, MAX_OVERRIDES_CHARS) } };
}

/** Settles a run that ended (cancelled, timed out) before it was planned, with nothing run. */
async function settleUnplanned(deps: ExecutorDeps, runId: string): Promise<RunStatus | 'gone'> {
  const ended = await deps.store.endUnstarted(runId, null, nowIso());
  if (ended.settled) await remember(deps, runId);
  if (ended.settled) await agentEnded(deps, runId, ended.status);
  if (ended.settled) await recordSettledRun(deps.store, runId);
  await releaseRun(deps, runId);
  await deps.webhooks?.runFinished(runId);
  deps.logger.info({ runId, status: ended.status }, 'run ended before it was planned');
  await deps.archive?.archiveRun(runId);
  return ended.status ?? 'gone';
}

/** Ends a task run whose plan could not be made or was rejected: failed, with nothing run. */
async function rejectPlan(deps: ExecutorDeps, runId: string, error: RunError): Promise<RunStatus> {
  metrics.planRejections.inc({ reason: error.code });
  metrics.runsFinished.inc({ status: 'failed' });
  const ended = await deps.store.endUnstarted(runId, error, nowIso());
  if (ended.settled) await remember(deps, runId);
  if (ended.settled) await agentEnded(deps, runId, ended.status);
  if (ended.settled) await recordSettledRun(deps.store, runId);
  await releaseRun(deps, runId);
  await deps.webhooks?.runFinished(runId);
  deps.logger.info({ runId, issues: error.issues?.length ?? 0 }, 'plan rejected');
  await deps.archive?.archiveRun(runId);
  return ended.status ?? 'failed';
}

/**
 * When a node handed the run back (budget exhausted, suspected loop, onError "replan"), plan the
 * remaining work: nodes of the new plan with the id and definition of a completed node reuse its
 * snapshot; the rest run under the next generation. `snapshots` are those read at settle time,
 * when every node job of the generation has finished.
 */
async function replanIfRequested(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  snapshots: ReadonlyMap<string, NodeSnapshot>,
): Promise<boolean> {
  const { store } = deps;
  const task = await store.taskOf(plan.runId);
  if (!task?.replanRequest) return false;
  const failure = task.replanRequest as RunError;
  const planner = deps.planning;
  if (!planner) throw new Error('this process cannot plan task runs');
  const capped = await dailyCapReached(deps, plan.tenant);
  if (capped) {
    const error: RunError = { code: 'budget_exhausted', message: capped.message, cause: capped };
    await store.decideError(plan.runId, error, nowIso(), generation);
    return false;
  }
  // Tracked before the status is read: a cancel or the deadline, published while the planner is
  // asked, aborts the call (the decision then stands and the run settles as decided).
  const tracked = deps.aborts.track(plan.runId);
  let result: Awaited<ReturnType<typeof planRun>> | { failed: NodeErrorData };
  // Window mode: the next window builds on the run so far, whose usage it carries over.
  const windowed = task.mode === 'window' && task.window ? await store.windowState(plan.runId) : null;
  try {
    if ((await store.status(plan.runId)) !== 'running') return false;
    const envVersion = await environmentVersionOf(deps, plan.runId);
    const reason = `${failure.cause?.code ?? failure.code}: ${failure.message}`;
    const next = {
      planVersion: generation + 1,
      environmentVersion: envVersion,
      signal: tracked.signal,
      tenant: plan.tenant,
    };
    result = await (
      windowed && task.window
        ? planWindow(planner, task, plan.input, {
            ...next,
            settings: task.window,
            previous: { graph: windowed.graph, planning: windowed.planning, snapshots, reason },
          })
        : planRun(planner, task, plan.input, {
            ...next,
            replan: { snapshots, failure: reason, nodes: [...plan.nodes.values()] },
          })
    ).catch((err: unknown) => ({ failed: toErrorData(err) }));
  } finally {
    tracked.release();
  }
  if ('failed' in result || 'error' in result || !result.outcome.ok) {
    const nodeId = failure.nodeId ? { nodeId: failure.nodeId } : {};
    let error: RunError;
    if ('failed' in result) {
      error = {
        code: 'plan_failed',
        message: `the planner call failed: ${result.failed.message}`,
        cause: result.failed,
        ...nodeId,
      };
    } else {
      if (!('error' in result))
        await store.charge(plan.runId, await plannerCharge(deps, plan, result.outcome));
      const issues = 'error' in result || result.outcome.ok ? [] : [...result.outcome.issues];
      const message = windowed ? 'the next window was rejected' : 'the replan was rejected';
      error = { code: 'plan_rejected', message, issues, ...nodeId };
    }
    await store.decideError(plan.runId, error, nowIso(), generation);
    return false;
  }
  const { outcome, planning } = result;
  const kept = new Set(
    outcome.plan.nodes
      .filter((n) => {
        const old = plan.nodes.get(n.id);
        return snapshots.get(n.id)?.status === 'succeeded' && old !== undefined && isDeepStrictEqual(old, n);
      })
      .map((n) => n.id),
  );
  const topology = buildTopology(
    outcome.plan.nodes.map((n) => n.id),
    outcome.plan.edges,
  );
  const pending = new Map(
    topology.ids
      .filter((id) => !kept.has(id))
      .map((id) => [id, (topology.parents.get(id) ?? []).filter((p) => !kept.has(p)).length]),
  );
  const drop = [...snapshots.keys()].filter((id) => !kept.has(id));
  const charge = await plannerCharge(deps, plan, outcome);
  const next = await store.replan(
    plan.runId,
    generation,
    { graph: outcome.graph, plan: outcome.plan, pending },
    planning,
    // A replan restarts the usage counters; a window run's budget holds for the whole run.
    windowed ? carryUsage(windowed.usage, charge) : charge,
    drop,
  );
  if (next === 0) return false;
  metrics.runActions.inc({ action: 'replan' });
  await enqueueRunRoot(deps.queues, plan.runId, next);
  deps.logger.info({ runId: plan.runId, generation: next, kept: kept.size }, 'task replanned');
  return true;
}

/**
 * A window-mode run whose window drained (every node job of the generation finished, nothing asked
 * for a replan): unless the window said the goal is reached, the next window is requested, as a
 * replan; with the run's windows used up, the run fails with `window_limit`. Returns the state the
 * finalize pass goes on with.
 */
async function windowDrained(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  state: OutcomeState,
): Promise<OutcomeState> {
  const { store } = deps;
  const { planning } = await store.windowState(plan.runId);
  const windows = planning?.windows ?? [];
  const last = windows.at(-1);
  // A rerun of a window run has no windows of its own: it runs its graph as given.
  if (!last || last.goalReached) return state;
  const drained = { code: 'window_drained', message: `window ${windows.length} drained` } as const;
  if (await store.requestReplan(plan.runId, drained, generation)) return { ...state, replanRequested: true };
  const error: RunError = {
    code: 'window_limit',
    message: `the run used its ${windows.length} window(s) without the planner reaching the goal`,
  };
  await store.decideError(plan.runId, error, nowIso(), generation);
  return store.outcomeState(plan.runId);
}

/** Adds the usage a window run had before a replan restarted its counters to the replan's charge. */
function carryUsage(before: WindowState['usage'], charge: UsageCharge): UsageCharge {
  return {
    ...charge,
    toolCalls: before.toolCalls + (charge.toolCalls ?? 0),
    toolTimeMs: before.toolTimeMs + (charge.toolTimeMs ?? 0),
    promptTokens: before.promptTokens + (charge.promptTokens ?? 0),
    completionTokens: before.completionTokens + (charge.completionTokens ?? 0),
    modelCalls: before.modelCalls + (charge.modelCalls ?? 0),
  };
}

/**
 * The environment version a session run's plan is made from (0 outside sessions); recorded on the
 * run. `sessionKey` is read from the run when not given.
 */
async function environmentVersionOf(
  deps: ExecutorDeps,
  runId: string,
  known?: string | null,
): Promise<number> {
  const sessionKey = known === undefined ? await deps.store.sessionOf(runId) : known;
  if (!sessionKey || !deps.sessions) return 0;
  const version = await deps.sessions.environmentVersion(sessionKey);
  await deps.store.setEnvironmentVersion(runId, version);
  return version;
}

/** Nodes without a snapshot whose dependencies all completed in a way that releases them. */
function readyNodes(plan: CompiledPlan, snapshots: ReadonlyMap<string, NodeSnapshot>): string[] {
  const releases = (id: string): boolean => releasesDependents(plan.nodes.get(id), snapshots.get(id));
  return plan.topology.ids.filter(
    (id) => !snapshots.has(id) && (plan.topology.parents.get(id) ?? []).every(releases),
  );
}

/**
 * A window ran past its cycle budget (seed `000_*` §2.3: an L3 cycle shares a fixed budget; what it
 * did not finish goes back to L2): the run asks for its next window now. Its running nodes finish,
 * its queued ones do not start (`node.deferred`, `cycle_budget`), and the planner is told so and
 * which nodes did not run. Nothing happens when the window ended first, or when the run has no
 * window left: then the window runs on.
 */
async function fireCycleBudget(deps: ExecutorDeps, job: Job): Promise<RunJobResult> {
  const data = DeadlineJobData.parse(job.data);
  const header = await deps.store.header(data.runId);
  const budgetMs = header.task?.window?.cycleBudgetMs;
  if (header.status !== 'running' || !budgetMs) return { status: header.status ?? 'gone' };
  const failure = {
    code: 'cycle_budget',
    message: `window ${data.generation + 1} ran past its cycle budget of ${budgetMs} ms`,
  } as const;
  if (await deps.store.requestReplan(data.runId, failure, data.generation)) {
    deps.logger.info({ runId: data.runId, generation: data.generation }, 'window cycle budget ran out');
  }
  return { status: header.status };
}

/** A deadline job an older process added (before run deadlines were swept): ends the run as a sweep would. */
async function fireDeadline(deps: ExecutorDeps, job: Job): Promise<RunJobResult> {
  const data = DeadlineJobData.parse(job.data);
  await endPastDeadline(deps, data.runId, data.generation);
  return { status: (await deps.store.status(data.runId)) ?? 'gone' };
}
