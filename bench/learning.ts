/**
 * Learning: does the reflect loop make Tetraloop better with use? The same seeded sequence of 300
 * runs goes through a fresh stack twice, once with `TETRALOOP_REFLECT=off` and once with it `on`.
 * Each run is a fixed one-node graph, an `http` call to one of three loopback hosts (three tool
 * servers, so three `host:port` targets): `healthy`; `slow`, whose answers take longer than the
 * tool timeout often enough that its p95 is above it; and `broken`, which answers 503 from run 50
 * until run 200, then recovers. One call to the healthy host answers 503, once. No model is
 * involved. Counted per pass from the run documents and the tool servers' logs: failed tool
 * executions, repeat failures (those after the first reflection that could have acted), runs
 * succeeded, calls that reached each host; and, with reflect on, the lessons over time (polled
 * from `GET /v1/agents/:id/lessons`), the reflections (the reflect queue's events), the calls that
 * reached the broken host while its hard lesson was in effect, and the time from its recovery to
 * the retirement of that lesson.
 *
 * A third, short part measures the plan cache: a seeded sequence of 60 task runs drawn from 6
 * distinct tasks (some written in several spellings that differ only in case and spacing) goes
 * through a stack with `TETRALOOP_PLAN_CACHE=on`, then one with it `off`. The planner is a scripted
 * OpenAI-compatible model server (through the real SDK) that answers every planner call with the
 * same one-node `json` graph. Counted: planner calls (the model server's requests with
 * `response_format` json_schema `graph`), planner tokens (the run documents' usage) and cache hits
 * and misses (the run documents' `planning.cache`).
 */
import { QueueEvents } from 'bullmq';
import { TetraloopClient, unwrap } from '@tetraloop/client';
import { Redis } from 'ioredis';
import type { RunDocument } from '@tetraloop/core/domain';
import type { Lesson } from '@tetraloop/core/memory';
import { QUEUE_NAMES } from '@tetraloop/core/queues';
import { startModelServer, type ChatRequest } from '../test/support/model-server.js';
import { startToolServer, type Hit, type ToolServer } from '../test/support/tool-server.js';
import { mulberry32 } from './support/dag.js';
import { percentile, startBenchStack, timedRun } from './support/stack.js';

const RUNS = 300;
const SEED = 20261201;
/** The broken host answers 503 from this run (0-based) on… */
const BREAK_AT = 50;
/** …until this one, from which it answers again. */
const RECOVER_AT = 200;
/** The first run at or after this one that calls the healthy host gets a single 503. */
const ISOLATED_FROM = 120;
const AGENT = 'learning';
/** Share of the slow host's calls drawn from its slow tail (above the tool timeout). */
const SLOW_TAIL_SHARE = 0.35;

const TOOL_TIMEOUT_MS = 300;
const PROBE_INTERVAL_MS = 2000;
/** The default: how long a worker uses the lessons it read before reading them again. */
const LESSON_REFRESH_MS = 1000;
/** The stack's settings, the same in both passes but for TETRALOOP_REFLECT. */
const ENV: Record<string, string> = {
  TETRALOOP_TOOL_TIMEOUT_MS: String(TOOL_TIMEOUT_MS),
  TETRALOOP_REFLECT_EVERY_RUNS: '20',
  TETRALOOP_LESSON_PROBE_INTERVAL_MS: String(PROBE_INTERVAL_MS),
  TETRALOOP_LESSON_REFRESH_MS: String(LESSON_REFRESH_MS),
  // Shorter backoff than the default (1 s base, 0.5 s floor) only to keep the suite short; the
  // retries per error class are the defaults (server 2, timeout 2, blocked_by_lesson 0).
  TETRALOOP_BACKOFF_BASE_MS: '100',
  TETRALOOP_BACKOFF_MAX_MS: '1000',
  // No job is active when a pass closes its stack; this only stops the pools' shutdown-grace timer
  // (30 s by default, not cleared when the workers close in time) from keeping the process alive.
  TETRALOOP_SHUTDOWN_GRACE_MS: '1000',
};
/** How often the reflect-on pass reads the agent's lessons to follow their status over time. */
const POLL_MS = 100;

const HOSTS = ['healthy', 'slow', 'broken'] as const;
type HostName = (typeof HOSTS)[number];

export interface Step {
  readonly index: number;
  readonly host: HostName;
  /** How long the host takes to answer this call when it answers. */
  readonly ms: number;
  /** This call answers 503 once (the isolated failure on the healthy host). */
  readonly isolated503: boolean;
}

/** The seeded sequence of runs: the same in both passes and on every machine. */
export function sequence(seed = SEED): Step[] {
  const rand = mulberry32(seed);
  let isolatedPlaced = false;
  return Array.from({ length: RUNS }, (_, index) => {
    const host = HOSTS[Math.floor(rand() * HOSTS.length)]!;
    const tail = rand() < SLOW_TAIL_SHARE;
    const u = rand();
    const ms =
      host === 'slow'
        ? Math.round(tail ? 330 + u * 270 : 80 + u * 170) // 330–600 ms or 80–250 ms
        : Math.round(5 + u * 25); // 5–30 ms
    const isolated503 = host === 'healthy' && index >= ISOLATED_FROM && !isolatedPlaced;
    if (isolated503) isolatedPlaced = true;
    return { index, host, ms, isolated503 };
  });
}

interface AttemptOutcome {
  readonly code: string | undefined;
  readonly ms: number;
}

interface RunOutcome {
  readonly index: number;
  readonly host: HostName;
  readonly status: string;
  readonly submittedAt: number;
  readonly wallMs: number;
  readonly attempts: AttemptOutcome[];
}

interface ReflectionEvent {
  readonly at: number;
  /** Runs submitted before it completed. */
  readonly afterRuns: number;
  readonly candidates: number;
  readonly version: number;
  readonly lessons: Record<string, number>;
}

interface LessonChange {
  readonly at: number;
  readonly afterRuns: number;
  readonly id: string;
  readonly kind: string;
  readonly rule: string;
  readonly host: string;
  readonly status: string;
  readonly confidence: number;
}

interface HitRecord {
  readonly node: string;
  readonly start: number;
  readonly status: number | undefined;
}

interface PassRaw {
  readonly reflect: boolean;
  readonly runs: RunOutcome[];
  readonly hits: Record<HostName, HitRecord[]>;
  readonly hostOf: Record<string, HostName>;
  readonly breakAt: number;
  readonly recoveredAt: number;
  readonly wallMs: number;
  readonly reflections: ReflectionEvent[];
  readonly changes: LessonChange[];
  readonly finalLessons: Lesson[];
  /** What `GET /v1/agents/:id/lessons` answered at the end (reflect off: 409 reflect_off). */
  readonly lessonsAnswer: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function readLessons(url: string): Promise<Lesson[]> {
  const { lessons } = unwrap(
    await new TetraloopClient({ baseUrl: url }).api.GET('/v1/agents/{agentId}/lessons', {
      params: { path: { agentId: AGENT } },
    }),
  );
  return lessons;
}

/** One pass of the whole sequence on a fresh stack and fresh hosts. */
async function runPass(
  reflect: boolean,
  steps: readonly Step[],
  log: (line: string) => void,
): Promise<PassRaw> {
  const servers = {} as Record<HostName, ToolServer>;
  for (const name of HOSTS) servers[name] = await startToolServer();
  const slowMs = new Map(steps.map((s) => [`r${s.index}`, s.ms]));
  servers.slow.setMode({ kind: 'slow', delayMs: (node) => slowMs.get(node) ?? 0 });
  const hostOf: Record<string, HostName> = {};
  for (const name of HOSTS) hostOf[new URL(servers[name].url).host] = name;

  const stack = await startBenchStack(
    { ...ENV, TETRALOOP_REFLECT: reflect ? 'on' : 'off' },
    { pools: ['plan', 'tool', 'reflect'] },
  );
  const eventsConnection = new Redis(stack.env.REDIS_URL!, { maxRetriesPerRequest: null });
  const events = new QueueEvents(QUEUE_NAMES.reflect, {
    connection: eventsConnection,
    prefix: stack.env.TETRALOOP_PREFIX!,
  });
  const reflections: ReflectionEvent[] = [];
  const changes: LessonChange[] = [];
  let submitted = 0;
  events.on('completed', ({ returnvalue }) => {
    const value = (typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue) as {
      candidates?: number;
      version?: number;
      lessons?: Record<string, number>;
    } | null;
    // The periodic sweep's jobs answer something else.
    if (value?.candidates === undefined) return;
    reflections.push({
      at: Date.now(),
      afterRuns: submitted,
      candidates: value.candidates,
      version: value.version ?? 0,
      lessons: value.lessons ?? {},
    });
  });
  await events.waitUntilReady();

  // Follows every lesson's status: a change is timed by the lesson's own updatedAt (set when
  // its status changed), bounded by the polls before and after it.
  let polling = reflect;
  const seen = new Map<string, string>();
  let lastPoll = Date.now();
  const poll = async (): Promise<void> => {
    const now = Date.now();
    for (const l of await readLessons(stack.url)) {
      if (seen.get(l.id) === l.status) continue;
      seen.set(l.id, l.status);
      const at = Math.max(lastPoll, Math.min(Date.parse(l.updatedAt), now));
      changes.push({
        at,
        afterRuns: submitted,
        id: l.id,
        kind: l.kind,
        rule: l.rule,
        host: hostOf[l.scope.host ?? ''] ?? l.scope.host ?? '-',
        status: l.status,
        confidence: l.confidence,
      });
    }
    lastPoll = now;
  };
  const poller = (async () => {
    while (polling) {
      await poll();
      await sleep(POLL_MS);
    }
  })();

  const runs: RunOutcome[] = [];
  let breakAt = 0;
  let recoveredAt = 0;
  const started = performance.now();
  try {
    for (const step of steps) {
      if (step.index === BREAK_AT) {
        servers.broken.setMode({ kind: 'status', status: 503 });
        breakAt = Date.now();
      }
      if (step.index === RECOVER_AT) {
        servers.broken.setMode({ kind: 'healthy' });
        recoveredAt = Date.now();
      }
      if (step.isolated503) servers.healthy.failNext(1, 503);
      const body = {
        agentId: AGENT,
        graph: {
          nodes: [
            {
              id: 'fetch',
              kind: 'tool',
              tool: 'http',
              args: { url: `${servers[step.host].url}/work?node=r${step.index}&ms=${step.ms}` },
            },
          ],
        },
      };
      const submittedAt = Date.now();
      submitted += 1;
      const { doc, wallMs } = await timedRun(stack.url, body);
      runs.push({
        index: step.index,
        host: step.host,
        status: doc.status,
        submittedAt,
        wallMs,
        attempts: attemptsOf(doc),
      });
      if ((step.index + 1) % 50 === 0)
        log(
          `  reflect ${reflect ? 'on ' : 'off'}: ${step.index + 1} runs, ${runs.filter((r) => r.status === 'succeeded').length} succeeded, ${((performance.now() - started) / 1000).toFixed(1)} s`,
        );
    }
    const wallMs = performance.now() - started;
    // Let a reflection triggered by the last runs finish, then read the lessons once more.
    await sleep(reflect ? 1000 : 0);
    polling = false;
    await poller;
    if (reflect) await poll();
    const finalLessons = reflect ? await readLessons(stack.url) : [];
    const answer = await fetch(`${stack.url}/v1/agents/${AGENT}/lessons`);
    const answered = (await answer.json()) as { lessons?: unknown[]; error?: { code?: string } };
    const lessonsAnswer = `${answer.status} ${answered.lessons ? `${answered.lessons.length} lessons` : (answered.error?.code ?? '')}`;
    const hits = {} as Record<HostName, HitRecord[]>;
    for (const name of HOSTS)
      hits[name] = servers[name].hits.map((h: Hit) => ({ node: h.node, start: h.start, status: h.status }));
    return {
      reflect,
      runs,
      hits,
      hostOf,
      breakAt,
      recoveredAt,
      wallMs,
      reflections,
      changes,
      finalLessons,
      lessonsAnswer,
    };
  } finally {
    polling = false;
    await poller.catch(() => undefined);
    await events.close();
    eventsConnection.disconnect();
    await stack.close();
    for (const name of HOSTS) await servers[name].close();
  }
}

function attemptsOf(doc: RunDocument): AttemptOutcome[] {
  const node = doc.nodes.fetch;
  if (!node) return [];
  return node.attempts.map((a) => ({ code: a.error?.code, ms: a.durationMs }));
}

// ---------------------------------------------------------------------------------------------
// Plan cache: repeated tasks with the cache on vs off.

const PLAN_RUNS = 60;
const PLAN_SEED = 20261202;
const PLAN_AGENT = 'plancache';
/** Six distinct tasks; some come in spellings that differ only in case and spacing. */
const PLAN_TASKS: readonly (readonly string[])[] = [
  ['Summarise the quarterly report', '  summarise the QUARTERLY report ', 'SUMMARISE the quarterly   report'],
  ['List the open invoices', 'list the open  invoices'],
  ['Check the status of the build'],
  ['Translate the release notes', ' Translate The Release Notes'],
  ['Count the new sign-ups of the week'],
  ['Draft a reply to the last support ticket'],
];
/** What the scripted planner answers, for every task: one `json` node, so no tool server. */
const PLAN_GRAPH = {
  nodes: [{ id: 'answer', kind: 'tool', tool: 'json', args: { value: '{{input.item}}' } }],
  edges: [],
};
const PLAN_ENV: Record<string, string> = {
  TETRALOOP_PLANNER_MODEL: 'scripted-planner',
  TETRALOOP_MODEL_MAX_RETRIES: '0',
  // Lessons version stays 0: no reflection can move the plans' key.
  TETRALOOP_REFLECT: 'off',
  TETRALOOP_SHUTDOWN_GRACE_MS: '1000',
};

export interface PlanStep {
  readonly index: number;
  /** Which of the six tasks (0-based). */
  readonly taskIndex: number;
  /** The spelling submitted. */
  readonly text: string;
}

/** The seeded sequence of task runs: the same in both passes and on every machine. */
export function planSequence(seed = PLAN_SEED): PlanStep[] {
  const rand = mulberry32(seed);
  return Array.from({ length: PLAN_RUNS }, (_, index) => {
    const taskIndex = Math.floor(rand() * PLAN_TASKS.length);
    const spellings = PLAN_TASKS[taskIndex]!;
    return { index, taskIndex, text: spellings[Math.floor(rand() * spellings.length)]! };
  });
}

const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

export interface PlanCachePass {
  cache: 'off' | 'on';
  runsSucceeded: number;
  /** Planner calls the model server received. */
  plannerCalls: number;
  /** Model calls charged to the runs (run documents' usage.modelCalls). */
  modelCallsCharged: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Runs whose planning record says `cache: "hit"` / `"miss"`. */
  hits: number;
  misses: number;
  /** Hits whose task text differs from the spelling of the run the plan was cached from. */
  hitsOnOtherSpelling: number;
  wallSeconds: number;
}

export interface PlanCacheResult {
  runs: number;
  seed: number;
  distinctTasks: number;
  spellings: number;
  /** Runs per task (index into the task list). */
  runsPerTask: number[];
  passes: PlanCachePass[];
  settings: Record<string, unknown>;
}

async function runPlanCachePass(
  cacheOn: boolean,
  steps: readonly PlanStep[],
  log: (line: string) => void,
): Promise<PlanCachePass> {
  const model = await startModelServer({
    script: (request) =>
      isPlannerCall(request) ? { content: JSON.stringify(PLAN_GRAPH) } : { content: 'ok' },
  });
  const stack = await startBenchStack({
    ...PLAN_ENV,
    OPENAI_BASE_URL: model.url,
    TETRALOOP_PLAN_CACHE: cacheOn ? 'on' : 'off',
  });
  const textOf = new Map<string, string>();
  const pass: PlanCachePass = {
    cache: cacheOn ? 'on' : 'off',
    runsSucceeded: 0,
    plannerCalls: 0,
    modelCallsCharged: 0,
    promptTokens: 0,
    completionTokens: 0,
    totalTokens: 0,
    hits: 0,
    misses: 0,
    hitsOnOtherSpelling: 0,
    wallSeconds: 0,
  };
  const started = performance.now();
  try {
    for (const step of steps) {
      const { doc } = await timedRun(stack.url, {
        task: step.text,
        agentId: PLAN_AGENT,
        input: { item: `item-${step.index}` },
      });
      textOf.set(doc.runId, step.text);
      if (doc.status === 'succeeded') pass.runsSucceeded += 1;
      pass.modelCallsCharged += doc.usage.modelCalls;
      pass.promptTokens += doc.usage.promptTokens;
      pass.completionTokens += doc.usage.completionTokens;
      pass.totalTokens += doc.usage.totalTokens;
      if (doc.planning?.cache === 'hit') {
        pass.hits += 1;
        const from = doc.planning.cachedFrom;
        if (from !== undefined && textOf.get(from) !== step.text) pass.hitsOnOtherSpelling += 1;
      } else if (doc.planning?.cache === 'miss') {
        pass.misses += 1;
      }
    }
    pass.wallSeconds = +((performance.now() - started) / 1000).toFixed(1);
    pass.plannerCalls = model.requests.filter(isPlannerCall).length;
    log(
      `  plan cache ${cacheOn ? 'on ' : 'off'}: ${pass.runsSucceeded}/${steps.length} succeeded, ${pass.plannerCalls} planner calls, ${pass.hits} hits, ${pass.misses} misses, ${pass.wallSeconds} s`,
    );
    return pass;
  } finally {
    await stack.close();
    await model.close();
  }
}

export async function runPlanCache(log: (line: string) => void): Promise<PlanCacheResult> {
  const steps = planSequence();
  const on = await runPlanCachePass(true, steps, log);
  const off = await runPlanCachePass(false, steps, log);
  return {
    runs: PLAN_RUNS,
    seed: PLAN_SEED,
    distinctTasks: new Set(steps.map((s) => s.taskIndex)).size,
    spellings: new Set(steps.map((s) => s.text)).size,
    runsPerTask: PLAN_TASKS.map((_, i) => steps.filter((s) => s.taskIndex === i).length),
    passes: [off, on],
    settings: {
      tasks: PLAN_TASKS,
      graph: PLAN_GRAPH,
      input: '{"item": "item-<i>"}: the same shape for every run, another value each time',
      planner:
        'scripted model server (test/support/model-server.ts) through the real openai SDK; no latency; tokens as the server estimates them (prompt: characters / 4; completion: answer characters / 4)',
      order: 'cache on first, then off; each on a fresh stack and redis-server',
      runsInFlight: 1,
      env: PLAN_ENV,
    },
  };
}

// ---------------------------------------------------------------------------------------------

export interface PassSummary {
  reflect: 'off' | 'on';
  runsSucceeded: number;
  failedExecutions: number;
  repeatFailures: number;
  /** Repeat failures by error class. */
  repeatByCode: Record<string, number>;
  failedByCode: Record<string, number>;
  /** Calls that reached each host (its server's log). */
  callsReached: Record<HostName, number>;
  byHost: Record<
    HostName,
    { runs: number; succeeded: number; failedExecutions: number; repeatFailures: number }
  >;
  wallSeconds: number;
}

export interface BrokenHostCheck {
  /** When its hard lesson took effect, and after how many runs. */
  activeAtRun: number | null;
  /** Seconds from the first 503 to the lesson being active. */
  secondsFromBreakToActive: number | null;
  /** Calls that reached the broken host while its hard lesson was active. */
  reachedWhileActive: number;
  /** …of them within the workers' lesson refresh after activation (the lesson was not yet read). */
  reachedInRefreshLag: number;
  /** …of them later, each at least one probe interval after the previous one: probes. */
  probes: number;
  /** …of them later and closer than a probe interval to the previous one: not probes (target 0). */
  notProbes: number;
  /** Calls the hard lesson refused (blocked_by_lesson attempts). */
  refused: number;
  /** …of them after the host had recovered, before a probe found it back. */
  refusedAfterRecovery: number;
  /** Times the hard lesson became active (1 is the expectation; more means it came back). */
  activations: number;
  recoveredAtRun: number;
  /** Milliseconds from recovery to the retirement of the hard lesson by a probe. */
  msFromRecoveryToRetired: number | null;
  /** The broken host's first call after recovery, ms after it (a probe can only happen on a call). */
  msFromRecoveryToNextCall: number | null;
  /** Status of the hard lesson at the end. */
  finalStatus: string | null;
}

export interface LearningResult {
  runs: number;
  seed: number;
  /** Runs from this index on count for repeat failures (see the definition). */
  repeatFrom: number;
  firstActingReflection: ReflectionEvent | null;
  passes: PassSummary[];
  broken: BrokenHostCheck;
  isolated: {
    run: number;
    /** Lessons about the healthy host that were ever in effect (target: none). */
    lessonsInEffect: string[];
    /** Lessons about the healthy host at the end, any status. */
    finalLessons: string[];
  };
  reflections: ReflectionEvent[];
  lessonChanges: (Omit<LessonChange, 'at'> & { atSeconds: number })[];
  finalLessons: {
    host: string;
    kind: string;
    rule: string;
    status: string;
    cases: number;
    confidence: number;
    timeoutMs?: number;
  }[];
  slowHost: { p50Ms: number; p95Ms: number; overTimeoutShare: number };
  /** Every run of each pass: `<index> <host> <status> <attempt outcomes>` (`ok` or the error class). */
  runLog: { off: string[]; on: string[] };
  /** `GET /v1/agents/learning/lessons` at the end of each pass. */
  lessonsAnswer: { off: string; on: string };
  planCache: PlanCacheResult;
  settings: Record<string, unknown>;
  targets: { target: string; result: string; met: boolean | null }[];
}

const count = (values: readonly (string | undefined)[]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const v of values) if (v !== undefined) out[v] = (out[v] ?? 0) + 1;
  return out;
};

function summarizePass(raw: PassRaw, repeatFrom: number): PassSummary {
  const failedOf = (r: RunOutcome): string[] =>
    r.attempts.map((a) => a.code).filter((c): c is string => c !== undefined);
  const repeatRuns = raw.runs.filter((r) => r.index >= repeatFrom);
  const byHost = {} as PassSummary['byHost'];
  for (const host of HOSTS) {
    const runs = raw.runs.filter((r) => r.host === host);
    byHost[host] = {
      runs: runs.length,
      succeeded: runs.filter((r) => r.status === 'succeeded').length,
      failedExecutions: runs.reduce((n, r) => n + failedOf(r).length, 0),
      repeatFailures: runs.filter((r) => r.index >= repeatFrom).reduce((n, r) => n + failedOf(r).length, 0),
    };
  }
  return {
    reflect: raw.reflect ? 'on' : 'off',
    runsSucceeded: raw.runs.filter((r) => r.status === 'succeeded').length,
    failedExecutions: raw.runs.reduce((n, r) => n + failedOf(r).length, 0),
    repeatFailures: repeatRuns.reduce((n, r) => n + failedOf(r).length, 0),
    repeatByCode: count(repeatRuns.flatMap(failedOf)),
    failedByCode: count(raw.runs.flatMap(failedOf)),
    callsReached: {
      healthy: raw.hits.healthy.length,
      slow: raw.hits.slow.length,
      broken: raw.hits.broken.length,
    },
    byHost,
    wallSeconds: +(raw.wallMs / 1000).toFixed(1),
  };
}

/** Runs submitted before `at`. */
const runsBefore = (raw: PassRaw, at: number): number => raw.runs.filter((r) => r.submittedAt < at).length;

function checkBroken(on: PassRaw): BrokenHostCheck {
  const hard = on.changes.filter((c) => c.host === 'broken' && c.kind === 'hard');
  // The periods in which the broken host's hard lesson was active (or pinned).
  const periods: { from: number; to: number }[] = [];
  for (const c of hard) {
    const inEffect = c.status === 'active' || c.status === 'pinned';
    const open = periods.at(-1);
    if (inEffect && (!open || open.to !== Infinity)) periods.push({ from: c.at, to: Infinity });
    else if (!inEffect && open && open.to === Infinity) open.to = c.at;
  }
  let reachedWhileActive = 0;
  let reachedInRefreshLag = 0;
  let probes = 0;
  let notProbes = 0;
  for (const p of periods) {
    let lastProbe = -Infinity;
    for (const h of on.hits.broken) {
      if (h.start < p.from || h.start >= p.to) continue;
      reachedWhileActive += 1;
      if (h.start < p.from + LESSON_REFRESH_MS) {
        reachedInRefreshLag += 1;
        continue;
      }
      // 50 ms of slack: the probe's claim is taken just before its call leaves.
      if (h.start - lastProbe >= PROBE_INTERVAL_MS - 50) {
        probes += 1;
        lastProbe = h.start;
      } else {
        notProbes += 1;
      }
    }
  }
  const retired = hard.find((c) => c.status === 'retired' && c.at >= on.recoveredAt);
  const nextCall = on.hits.broken.find((h) => h.start >= on.recoveredAt);
  const firstActive = periods[0];
  const final = on.finalLessons.find((l) => l.kind === 'hard' && on.hostOf[l.scope.host ?? ''] === 'broken');
  return {
    activeAtRun: firstActive ? runsBefore(on, firstActive.from) : null,
    secondsFromBreakToActive: firstActive ? +((firstActive.from - on.breakAt) / 1000).toFixed(1) : null,
    reachedWhileActive,
    reachedInRefreshLag,
    probes,
    notProbes,
    refused: on.runs
      .filter((r) => r.host === 'broken')
      .reduce((n, r) => n + r.attempts.filter((a) => a.code === 'blocked_by_lesson').length, 0),
    refusedAfterRecovery: on.runs
      .filter((r) => r.host === 'broken' && r.index >= RECOVER_AT)
      .reduce((n, r) => n + r.attempts.filter((a) => a.code === 'blocked_by_lesson').length, 0),
    activations: periods.length,
    recoveredAtRun: RECOVER_AT,
    msFromRecoveryToRetired: retired ? Math.round(retired.at - on.recoveredAt) : null,
    msFromRecoveryToNextCall: nextCall ? Math.round(nextCall.start - on.recoveredAt) : null,
    finalStatus: final?.status ?? null,
  };
}

const pct = (a: number, b: number): string => (a === 0 ? '—' : `−${((100 * (a - b)) / a).toFixed(1)} %`);

function planCacheTarget(r: PlanCacheResult): LearningResult['targets'][number] {
  const [off, on] = r.passes as [PlanCachePass, PlanCachePass];
  return {
    target: 'repeated tasks hit the plan cache (planner calls saved)',
    result:
      `${r.runs} runs of ${r.distinctTasks} tasks (${r.spellings} spellings): planner calls ${off.plannerCalls} → ${on.plannerCalls} (${off.plannerCalls - on.plannerCalls} saved, ${pct(off.plannerCalls, on.plannerCalls)}), ` +
      `planner tokens ${off.totalTokens} → ${on.totalTokens} (${off.totalTokens - on.totalTokens} saved, ${pct(off.totalTokens, on.totalTokens)}); ` +
      `${on.hits} hits (${on.hitsOnOtherSpelling} on another spelling), ${on.misses} misses`,
    met:
      on.runsSucceeded === r.runs &&
      off.runsSucceeded === r.runs &&
      on.misses === r.distinctTasks &&
      on.hits === r.runs - r.distinctTasks &&
      on.plannerCalls === r.distinctTasks &&
      off.plannerCalls === r.runs,
  };
}

const runLog = (raw: PassRaw): string[] =>
  raw.runs.map((r) => `${r.index} ${r.host} ${r.status} ${r.attempts.map((a) => a.code ?? 'ok').join(',')}`);

export async function runLearning(log: (line: string) => void = console.log): Promise<LearningResult> {
  const steps = sequence();
  const off = await runPass(false, steps, log);
  const on = await runPass(true, steps, log);
  const planCache = await runPlanCache(log);

  // The first reflection that could have acted: the first whose rules proposed a lesson.
  const firstActing = on.reflections.find((r) => r.candidates > 0) ?? null;
  const repeatFrom = firstActing ? firstActing.afterRuns : RUNS;
  const passes = [summarizePass(off, repeatFrom), summarizePass(on, repeatFrom)];
  const broken = checkBroken(on);
  const isolatedRun = steps.find((s) => s.isolated503)!.index;
  const healthyChanges = on.changes.filter((c) => c.host === 'healthy');
  const slowDelays = steps.filter((s) => s.host === 'slow').map((s) => s.ms);
  const t0 = on.runs[0]?.submittedAt ?? 0;

  const [offPass, onPass] = passes as [PassSummary, PassSummary];
  const drop = offPass.repeatFailures > 0 ? 1 - onPass.repeatFailures / offPass.repeatFailures : 0;
  const targets: LearningResult['targets'] = [
    {
      target: 'repeat failures fall by ≥ 40 % with reflect on',
      result: `${offPass.repeatFailures} → ${onPass.repeatFailures} (−${(drop * 100).toFixed(1)} %)`,
      met: drop >= 0.4,
    },
    {
      target: 'runs that succeed rise',
      result: `${offPass.runsSucceeded} → ${onPass.runsSucceeded} of ${RUNS}`,
      met: onPass.runsSucceeded > offPass.runsSucceeded,
    },
    {
      target: `calls reaching the broken host while its hard lesson is in effect (from ${LESSON_REFRESH_MS} ms after activation, the workers' lesson refresh) are only probes`,
      result: `${broken.reachedWhileActive} reached: ${broken.probes} probes, ${broken.notProbes} not probes, ${broken.reachedInRefreshLag} within the ${LESSON_REFRESH_MS} ms lesson refresh after activation`,
      met: broken.activations > 0 && broken.notProbes === 0,
    },
    {
      target: 'the isolated 503 produces no active lesson',
      result: `503 at run ${isolatedRun}: ${
        healthyChanges.length === 0
          ? 'no lesson about the healthy host, in any status'
          : healthyChanges.map((c) => `${c.rule} ${c.status}`).join(', ')
      }`,
      met: !healthyChanges.some((c) => c.status === 'active' || c.status === 'pinned'),
    },
    {
      target: `the broken host's hard lesson retires within one probe interval (${PROBE_INTERVAL_MS} ms) of recovery`,
      result:
        broken.msFromRecoveryToRetired === null
          ? 'not retired after recovery'
          : `${broken.msFromRecoveryToRetired} ms (next call to the host ${broken.msFromRecoveryToNextCall} ms after recovery); final status ${broken.finalStatus}; active ${broken.activations}×`,
      met:
        broken.msFromRecoveryToRetired !== null &&
        broken.msFromRecoveryToRetired <= PROBE_INTERVAL_MS &&
        broken.finalStatus === 'retired',
    },
    planCacheTarget(planCache),
  ];

  const result: LearningResult = {
    runs: RUNS,
    seed: SEED,
    repeatFrom,
    firstActingReflection: firstActing,
    passes,
    broken,
    isolated: {
      run: isolatedRun,
      lessonsInEffect: healthyChanges
        .filter((c) => c.status === 'active' || c.status === 'pinned')
        .map((c) => c.id),
      finalLessons: on.finalLessons
        .filter((l) => on.hostOf[l.scope.host ?? ''] === 'healthy')
        .map((l) => `${l.id} ${l.status}`),
    },
    reflections: on.reflections,
    lessonChanges: on.changes.map(({ at, ...c }) => ({ ...c, atSeconds: +((at - t0) / 1000).toFixed(2) })),
    finalLessons: on.finalLessons.map((l) => ({
      host: on.hostOf[l.scope.host ?? ''] ?? l.scope.host ?? '-',
      kind: l.kind,
      rule: l.rule,
      status: l.status,
      cases: l.cases,
      confidence: l.confidence,
      ...(l.effect?.timeoutMs !== undefined ? { timeoutMs: l.effect.timeoutMs } : {}),
    })),
    slowHost: {
      p50Ms: percentile(slowDelays, 50),
      p95Ms: percentile(slowDelays, 95),
      overTimeoutShare: +(slowDelays.filter((ms) => ms > TOOL_TIMEOUT_MS).length / slowDelays.length).toFixed(
        2,
      ),
    },
    runLog: { off: runLog(off), on: runLog(on) },
    lessonsAnswer: { off: off.lessonsAnswer, on: on.lessonsAnswer },
    planCache,
    settings: {
      runs: RUNS,
      seed: SEED,
      hosts: 'three loopback tool servers (test/support/tool-server.ts), each its own host:port',
      sequence: `each run picks a host uniformly; healthy and broken answer in 5–30 ms; slow in 80–250 ms, or 330–600 ms with probability ${SLOW_TAIL_SHARE}`,
      broken: `503 from run ${BREAK_AT} until run ${RECOVER_AT} (0-based), then healthy`,
      isolated: `one 503 on the healthy host, at run ${isolatedRun}`,
      graph: 'one http tool node per run, agentId "learning"',
      runsInFlight: 1,
      env: ENV,
      pools: 'plan, tool and reflect in the benchmark process; API in the benchmark process',
    },
    targets,
  };
  log(
    `  repeat failures (runs ≥ ${repeatFrom}): off ${offPass.repeatFailures}, on ${onPass.repeatFailures}; succeeded: off ${offPass.runsSucceeded}, on ${onPass.runsSucceeded}`,
  );
  return result;
}

// ---------------------------------------------------------------------------------------------

const yesNo = (met: boolean | null): string => (met === null ? '—' : met ? '**yes**' : '**no**');
const codes = (c: Record<string, number>): string =>
  Object.entries(c)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || '—';

function planCacheTable(p: PlanCacheResult, change: (a: number, b: number) => string): string {
  const [off, on] = p.passes as [PlanCachePass, PlanCachePass];
  const row = (label: string, a: number, b: number): string => `| ${label} | ${a} | ${b} | ${change(a, b)} |`;
  return [
    `Plan cache: ${p.runs} task runs (seed ${p.seed}) of ${p.distinctTasks} distinct tasks in ${p.spellings} spellings (runs per task ${p.runsPerTask.join(', ')}), one at a time, the scripted planner answering one \`json\` node:`,
    '',
    '| measure | plan cache off | plan cache on | change |',
    '|---|---:|---:|---:|',
    row(`runs succeeded (of ${p.runs})`, off.runsSucceeded, on.runsSucceeded),
    row('**planner calls** (model server requests, json_schema `graph`)', off.plannerCalls, on.plannerCalls),
    row('model calls charged to the runs (`usage.modelCalls`)', off.modelCallsCharged, on.modelCallsCharged),
    row('**planner tokens** (`usage.totalTokens`)', off.totalTokens, on.totalTokens),
    `| prompt / completion tokens | ${off.promptTokens} / ${off.completionTokens} | ${on.promptTokens} / ${on.completionTokens} | |`,
    `| cache hits / misses (\`planning.cache\`) | — | ${on.hits} / ${on.misses} (${on.hitsOnOtherSpelling} hits on another spelling) | |`,
    row('wall time of the pass (s)', off.wallSeconds, on.wallSeconds),
  ].join('\n');
}

export function learningTable(r: LearningResult): string {
  const [off, on] = r.passes as [PassSummary, PassSummary];
  const change = (a: number, b: number): string =>
    a === 0 ? '—' : `${b >= a ? '+' : '−'}${Math.abs((100 * (b - a)) / a).toFixed(1)} %`;
  const lines = [
    `| measure | reflect off | reflect on | change |`,
    `|---|---:|---:|---:|`,
    `| runs succeeded (of ${r.runs}) | ${off.runsSucceeded} | ${on.runsSucceeded} | ${change(off.runsSucceeded, on.runsSucceeded)} |`,
    `| failed tool executions, all runs | ${off.failedExecutions} | ${on.failedExecutions} | ${change(off.failedExecutions, on.failedExecutions)} |`,
    `| **repeat failures** (failed executions of runs ${r.repeatFrom}–${r.runs - 1}) | ${off.repeatFailures} | ${on.repeatFailures} | ${change(off.repeatFailures, on.repeatFailures)} |`,
    `| repeat failures by class | ${codes(off.repeatByCode)} | ${codes(on.repeatByCode)} | |`,
    ...HOSTS.map(
      (h) =>
        `| ${h} host: runs succeeded / repeat failures (${off.byHost[h].runs} runs) | ${off.byHost[h].succeeded} / ${off.byHost[h].repeatFailures} | ${on.byHost[h].succeeded} / ${on.byHost[h].repeatFailures} | |`,
    ),
    ...HOSTS.map(
      (h) =>
        `| calls that reached the ${h} host | ${off.callsReached[h]} | ${on.callsReached[h]} | ${change(off.callsReached[h], on.callsReached[h])} |`,
    ),
    `| wall time of the pass | ${off.wallSeconds} s | ${on.wallSeconds} s | ${change(off.wallSeconds, on.wallSeconds)} |`,
    '',
    planCacheTable(r.planCache, change),
    '',
    '| target | result | met? |',
    '|---|---|---|',
    ...r.targets.map((t) => `| ${t.target} | ${t.result} | ${yesNo(t.met)} |`),
    '',
    `First reflection that could have acted (its rules proposed a lesson): completed after ${r.firstActingReflection?.afterRuns ?? '—'} runs, so repeat failures count runs ${r.repeatFrom}–${r.runs - 1} in both passes. ` +
      `Reflections in the reflect-on pass: ${r.reflections.length}. ` +
      `Broken host (503 from run ${BREAK_AT}): hard lesson active after run ${r.broken.activeAtRun ?? '—'} (${r.broken.secondsFromBreakToActive ?? '—'} s after the first 503), ` +
      `${r.broken.refused} calls refused (${r.broken.refusedAfterRecovery} of them after its recovery at run ${RECOVER_AT}, before the probe), ${r.broken.reachedWhileActive} reached it while the lesson was active. ` +
      `Slow host calls: p50 ${r.slowHost.p50Ms} ms, p95 ${r.slowHost.p95Ms} ms, ${(r.slowHost.overTimeoutShare * 100).toFixed(0)} % above the ${TOOL_TIMEOUT_MS} ms tool timeout.`,
    '',
    `Lessons at the end (\`GET /v1/agents/learning/lessons\`; reflect off answered ${r.lessonsAnswer.off}):`,
    '',
    '| host | kind | rule | status | cases | confidence | effect |',
    '|---|---|---|---|---:|---:|---|',
    ...r.finalLessons.map(
      (l) =>
        `| ${l.host} | ${l.kind} | ${l.rule} | ${l.status} | ${l.cases} | ${l.confidence} | ${l.timeoutMs !== undefined ? `timeout ${l.timeoutMs} ms` : '—'} |`,
    ),
    '',
    `Lesson status changes (run count when seen, seconds into the pass): ${r.lessonChanges
      .map((c) => `${c.host} ${c.rule} → ${c.status} (run ${c.afterRuns}, ${c.atSeconds} s)`)
      .join('; ')}.`,
  ];
  return lines.join('\n');
}
