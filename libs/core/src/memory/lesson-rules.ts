/**
 * The rules that turn the record into candidate lessons. Deterministic: the same hot set always
 * gives the same candidates. Each rule looks at the latest calls of one tool to one service (a
 * window over the hot set) and needs failures in several distinct runs, so one anomaly never
 * makes a lesson. Pure.
 */
import type { LessonCandidate } from './lesson.js';
import { quantile, bucketOf, LATENCY_BUCKETS_MS } from './latency.js';
import type { RunSummary } from './run-summary.js';

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
}

export const DEFAULT_RULE_SETTINGS: RuleSettings = {
  window: 20,
  downRate: 0.8,
  flakyRate: 0.3,
  slowRate: 0.2,
  minRuns: 3,
  maxTimeoutMs: 120_000,
};

interface Call {
  readonly runId: string;
  readonly ms: number;
  readonly outcome: string;
}

/** The latest calls of each tool to each named service, newest first, at most `window` each. */
export function callsByService(hot: readonly RunSummary[], window: number): Map<string, Call[]> {
  const byService = new Map<string, Call[]>();
  for (const run of hot) {
    for (const call of run.calls) {
      // A call a hard lesson refused says nothing about the service: it never reached it.
      if (call.target === '-' || call.outcome === 'blocked_by_lesson') continue;
      const key = `${call.tool}|${call.target}`;
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

export function candidateLessons(
  hot: readonly RunSummary[],
  settings: RuleSettings = DEFAULT_RULE_SETTINGS,
): LessonCandidate[] {
  const candidates: LessonCandidate[] = [];
  for (const [key, calls] of callsByService(hot, settings.window)) {
    const [tool = '', host = ''] = key.split('|');
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
        statement: `${host} is down for ${tool}: ${percent(down.length, calls.length)} recent calls failed with server or network errors; calls to it are blocked until a probe succeeds`,
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
        statement: `${host} is slow for ${tool}: ${percent(timeouts.length, calls.length)} recent calls timed out at about ${cutAt} ms; its calls get ${timeoutMs} ms`,
        evidence: timeoutRuns,
        confidence: confidenceOf(timeoutRuns.length),
        effect: { timeoutMs },
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
        statement: `${host} often fails for ${tool} (${percent(failed.length, calls.length)} recent calls, mostly ${mostly}): prefer another source, or plan for its failure`,
        evidence: failedRuns,
        confidence: confidenceOf(failedRuns.length),
      });
    }
  }
  return candidates;
}
