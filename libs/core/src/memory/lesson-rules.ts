/**
 * The rules that turn the record into candidate lessons. Deterministic: the same hot set always
 * gives the same candidates. Each service rule looks at the latest calls of one tool to one service
 * (a window over the hot set) and needs failures in several distinct runs, so one anomaly never
 * makes a lesson; the prefer rule compares the tools and services one step used. Pure.
 */
import type { LessonCandidate } from './lesson.js';
import { quantile, bucketOf, LATENCY_BUCKETS_MS } from './latency.js';
import { INVALID_ANSWER, type RunSummary } from './run-summary.js';

export interface RuleSettings {
  /** How many of a service's latest calls a rule looks at. @defaultValue 20 */
  readonly window: number;
  /** Share of server/network failures that makes a service down (hard). @defaultValue 0.8 */
  readonly downRate: number;
  /** Share of failures that makes a service flaky (soft). @defaultValue 0.3 */
  readonly flakyRate: number;
  /** Share of timeouts that makes a service slow (template). @defaultValue 0.2 */
  readonly slowRate: number;
  /** Distinct runs a rule needs before it proposes anything. @defaultValue 3 */
  readonly minRuns: number;
  /** The longest timeout a template lesson sets. @defaultValue 120000 */
  readonly maxTimeoutMs: number;
  /** Share of `rate_limited` failures that makes a service rate-limited (template). @defaultValue 0.2 */
  readonly rateLimitedRate: number;
  /** Retries a rate-limited service's `rate_limited` failures get. @defaultValue 4 */
  readonly rateLimitRetries: number;
  /** The shortest delay before such a retry (ms). @defaultValue 5000 */
  readonly rateLimitBackoffMs: number;
  /** Share of a model node's answers failing its schema that makes a template. @defaultValue 0.3 */
  readonly invalidAnswerRate: number;
}

export const DEFAULT_RULE_SETTINGS: RuleSettings = {
  window: 20,
  downRate: 0.8,
  flakyRate: 0.3,
  slowRate: 0.2,
  minRuns: 3,
  maxTimeoutMs: 120_000,
  rateLimitedRate: 0.2,
  rateLimitRetries: 4,
  rateLimitBackoffMs: 5000,
  invalidAnswerRate: 0.3,
};

/** The tool name model calls are recorded under; their target is the model. */
export const MODEL_CALL_TOOL = 'llm';

interface Call {
  readonly runId: string;
  readonly ms: number;
  readonly outcome: string;
}

/**
 * The latest calls of each tool to each named service, newest first, at most `window` each. Model
 * calls are grouped by model and node: what a node asks of a model is what its answers depend on.
 */
export function callsByService(hot: readonly RunSummary[], window: number): Map<string, Call[]> {
  const byService = new Map<string, Call[]>();
  for (const run of hot) {
    for (const call of run.calls) {
      // A call a hard lesson refused says nothing about the service: it never reached it.
      if (call.target === '-' || call.outcome === 'blocked_by_lesson') continue;
      const key =
        call.tool === MODEL_CALL_TOOL
          ? `${call.tool}|${call.target}|${call.node}`
          : `${call.tool}|${call.target}`;
      const calls = byService.get(key) ?? [];
      if (calls.length < window) calls.push({ runId: run.runId, ms: call.ms, outcome: call.outcome });
      byService.set(key, calls);
    }
  }
  return byService;
}

const distinctRuns = (calls: readonly Call[]): string[] => [...new Set(calls.map((c) => c.runId))];
/** Confidence from the number of distinct supporting runs: 0.2 per run, at most 0.9. */
const confidenceOf = (runs: number): number => Math.min(0.9, Math.round(runs * 0.2 * 100) / 100);
const percent = (n: number, of: number): string => `${n} of ${of}`;
/**
 * ` for <tool>` after the service a statement is about; nothing when the service is the tool itself
 * (a custom tool's calls are keyed by its name: "svc.fetch is down", not "svc.fetch is down for svc.fetch").
 */
const forTool = (tool: string, host: string): string => (host === tool ? '' : ` for ${tool}`);

export function candidateLessons(
  hot: readonly RunSummary[],
  settings: RuleSettings = DEFAULT_RULE_SETTINGS,
): LessonCandidate[] {
  const candidates: LessonCandidate[] = [];
  for (const [key, calls] of callsByService(hot, settings.window)) {
    const [tool = '', host = '', node] = key.split('|');
    if (node !== undefined) {
      const candidate = invalidAnswers(calls, { tool, host, node }, settings);
      if (candidate) candidates.push(candidate);
      continue;
    }
    const scope = { tool, host };
    const failed = calls.filter((c) => c.outcome !== 'ok');
    const down = calls.filter((c) => c.outcome === 'server' || c.outcome === 'network');
    const timeouts = calls.filter((c) => c.outcome === 'timeout');

    // service-down: nearly every recent call fails on the service's side, the latest among them
    // (a service whose latest call succeeded — a probe that found it back — is not down now).
    const downRuns = distinctRuns(down);
    const latestDown = calls[0]?.outcome === 'server' || calls[0]?.outcome === 'network';
    if (
      latestDown &&
      downRuns.length >= settings.minRuns &&
      down.length >= settings.downRate * calls.length
    ) {
      candidates.push({
        kind: 'hard',
        rule: 'service-down',
        scope,
        statement: `${host} is down${forTool(tool, host)}: ${percent(down.length, calls.length)} recent calls failed with server or network errors; calls to it are blocked until a probe succeeds`,
        evidence: downRuns,
        confidence: confidenceOf(downRuns.length),
      });
      continue;
    }

    // slow-service: calls are cut off by their timeout while the service does answer.
    const timeoutRuns = distinctRuns(timeouts);
    if (timeoutRuns.length >= settings.minRuns && timeouts.length >= settings.slowRate * calls.length) {
      const ok = calls.filter((c) => c.outcome === 'ok');
      const counts = new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0);
      for (const c of ok) counts[bucketOf(c.ms)]! += 1;
      const p95 = quantile(counts, 0.95) ?? 0;
      const cutAt = Math.max(...timeouts.map((c) => c.ms));
      const timeoutMs = Math.min(settings.maxTimeoutMs, Math.ceil((1.5 * Math.max(p95, cutAt)) / 100) * 100);
      candidates.push({
        kind: 'template',
        rule: 'slow-service',
        scope,
        statement: `${host} is slow${forTool(tool, host)}: ${percent(timeouts.length, calls.length)} recent calls timed out at about ${cutAt} ms; its calls get ${timeoutMs} ms`,
        evidence: timeoutRuns,
        confidence: confidenceOf(timeoutRuns.length),
        effect: { timeoutMs },
      });
      continue;
    }

    // rate-limited: the service keeps answering 429. Its calls get more retries of that failure,
    // spaced by a longer floor, so they wait out the limit instead of failing the run.
    const limited = calls.filter((c) => c.outcome === 'rate_limited');
    const limitedRuns = distinctRuns(limited);
    if (limitedRuns.length >= settings.minRuns && limited.length >= settings.rateLimitedRate * calls.length) {
      candidates.push({
        kind: 'template',
        rule: 'rate-limited',
        scope,
        statement: `${host === tool ? `${tool} is rate-limited` : `${host} rate-limits ${tool}`}: ${percent(limited.length, calls.length)} recent calls were answered 429; its rate-limited calls get ${settings.rateLimitRetries} retries at least ${settings.rateLimitBackoffMs} ms apart`,
        evidence: limitedRuns,
        confidence: confidenceOf(limitedRuns.length),
        effect: { retries: settings.rateLimitRetries, backoffFloorMs: settings.rateLimitBackoffMs },
      });
      continue;
    }

    // service-flaky: a sizeable share of recent calls fails.
    const failedRuns = distinctRuns(failed);
    if (failedRuns.length >= settings.minRuns && failed.length >= settings.flakyRate * calls.length) {
      const classes = new Map<string, number>();
      for (const c of failed) classes.set(c.outcome, (classes.get(c.outcome) ?? 0) + 1);
      const [mostly = 'error'] =
        [...classes].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0] ?? [];
      candidates.push({
        kind: 'soft',
        rule: 'service-flaky',
        scope,
        statement: `${host} often fails${forTool(tool, host)} (${percent(failed.length, calls.length)} recent calls, mostly ${mostly}): prefer another source, or plan for its failure`,
        evidence: failedRuns,
        confidence: confidenceOf(failedRuns.length),
      });
    }
  }
  return [...candidates, ...preferences(hot, settings)];
}

/**
 * invalid-answer: a model node's JSON answer keeps failing its schema. Its calls get temperature 0
 * and the schema repeated in the prompt.
 */
function invalidAnswers(
  calls: readonly Call[],
  scope: { tool: string; host: string; node: string },
  settings: RuleSettings,
): LessonCandidate | undefined {
  const invalid = calls.filter((c) => c.outcome === INVALID_ANSWER);
  const runs = distinctRuns(invalid);
  if (runs.length < settings.minRuns || invalid.length < settings.invalidAnswerRate * calls.length) {
    return undefined;
  }
  return {
    kind: 'template',
    rule: 'invalid-answer',
    scope,
    statement: `${scope.host} answers node ${scope.node} outside its schema: ${percent(invalid.length, calls.length)} recent answers failed it; its calls get temperature 0 and the schema in the prompt`,
    evidence: runs,
    confidence: confidenceOf(runs.length),
    effect: { temperature: 0, schemaInPrompt: true },
  };
}

/** One tool and the service it reached (`-` when it names none). */
interface ToolUse {
  readonly tool: string;
  readonly target: string;
}

/**
 * The latest calls of each tool to each service, per step: a node id within one task or graph
 * (its fingerprint). The same step is the same kind of call; a node id alone is not (planners
 * reuse ids such as `fetch` or `n1` for unrelated work). Calls a hard lesson refused and model
 * calls (no tool a plan chooses) are left out.
 */
function callsByStep(hot: readonly RunSummary[], window: number): Map<string, Map<string, Call[]>> {
  const steps = new Map<string, Map<string, Call[]>>();
  for (const run of hot) {
    for (const call of run.calls) {
      if (call.tool === MODEL_CALL_TOOL || call.outcome === 'blocked_by_lesson') continue;
      const step = `${run.fingerprint}|${call.node}`;
      const used = steps.get(step) ?? new Map<string, Call[]>();
      steps.set(step, used);
      const key = `${call.tool}|${call.target}`;
      const calls = used.get(key) ?? [];
      used.set(key, calls);
      if (calls.length < window) calls.push({ runId: run.runId, ms: call.ms, outcome: call.outcome });
    }
  }
  return steps;
}

/**
 * prefer: in the same step, one tool or service keeps failing (the flaky bar: `flakyRate` of its
 * calls, in `minRuns` distinct runs) where another succeeds (below that share of failures, with
 * successes in `minRuns` distinct runs). The planner is to prefer the one that works. Each failing
 * one gets one lesson at most, about the alternative with the most successful runs, so prefer
 * lessons stay within one per service.
 */
function preferences(hot: readonly RunSummary[], settings: RuleSettings): LessonCandidate[] {
  const split = (key: string): ToolUse => {
    const [tool = '', target = ''] = key.split('|');
    return { tool, target };
  };
  // Failing tool|service → alternative tool|service → the calls of both in the steps they share.
  const found = new Map<string, Map<string, { worse: Call[]; better: Call[] }>>();
  for (const used of callsByStep(hot, settings.window).values()) {
    if (used.size < 2) continue;
    const failing: string[] = [];
    const working: string[] = [];
    for (const [key, calls] of used) {
      const failed = calls.filter((c) => c.outcome !== 'ok');
      const ok = calls.filter((c) => c.outcome === 'ok');
      if (failed.length >= settings.flakyRate * calls.length) {
        if (distinctRuns(failed).length >= settings.minRuns) failing.push(key);
      } else if (distinctRuns(ok).length >= settings.minRuns) working.push(key);
    }
    for (const worse of failing) {
      const alternatives = found.get(worse) ?? new Map<string, { worse: Call[]; better: Call[] }>();
      found.set(worse, alternatives);
      for (const better of working) {
        const pair = alternatives.get(better) ?? { worse: [], better: [] };
        pair.worse.push(...used.get(worse)!);
        pair.better.push(...used.get(better)!);
        alternatives.set(better, pair);
      }
    }
  }
  // Newest first, as the hot set is.
  const order = new Map(hot.map((run, i) => [run.runId, i]));
  const candidates: LessonCandidate[] = [];
  for (const [worseKey, alternatives] of [...found].sort((a, b) => a[0].localeCompare(b[0]))) {
    const okRuns = (calls: readonly Call[]): number =>
      distinctRuns(calls.filter((c) => c.outcome === 'ok')).length;
    const best = [...alternatives].sort(
      (a, b) => okRuns(b[1].better) - okRuns(a[1].better) || a[0].localeCompare(b[0]),
    )[0];
    if (!best) continue;
    const [betterKey, { worse, better }] = best;
    const worseFailed = worse.filter((c) => c.outcome !== 'ok');
    const betterOk = better.filter((c) => c.outcome === 'ok');
    const evidence = distinctRuns([...worseFailed, ...betterOk]).sort(
      (a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0),
    );
    const a = split(betterKey);
    const b = split(worseKey);
    const sameTool = a.tool === b.tool;
    // A tool naming no service, or a custom tool (its calls are keyed by its name), is named once.
    const name = (u: ToolUse): string =>
      sameTool ? u.target : u.target === '-' || u.target === u.tool ? u.tool : `${u.tool} (${u.target})`;
    const subject = sameTool ? `${a.target} over ${b.target} for ${a.tool}` : `${name(a)} over ${name(b)}`;
    candidates.push({
      kind: 'prefer',
      rule: 'prefer',
      scope: {
        tool: a.tool,
        ...(a.target !== '-' ? { host: a.target } : {}),
        overTool: b.tool,
        ...(b.target !== '-' ? { overHost: b.target } : {}),
      },
      statement: `prefer ${subject}: in the same steps, ${name(b)} failed ${percent(worseFailed.length, worse.length)} recent calls while ${name(a)} succeeded in ${percent(betterOk.length, better.length)}`,
      evidence,
      confidence: confidenceOf(evidence.length),
    });
  }
  return candidates;
}
