/**
 * The compact record a run leaves in memory when it settles: what it was (a task or graph
 * fingerprint), how it ended, and every tool call it made with the service it reached, how long
 * it took and how it ended. The full record stays the run document, for its own retention. Pure.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { AttemptRecord, RunDocument } from '../domain/run-model.js';
import { DEFAULT_TENANT, scopedName } from '../domain/tenant.js';
import type { NodeErrorData } from '../errors/node-error.js';

/** One call of a tool: one attempt of a node (or the last call of a loop's attempt). */
export const CallRecord = z.object({
  node: z.string(),
  tool: z.string(),
  /** The outside service reached (the http tool: the URL's host); `-` when the tool names none. */
  target: z.string(),
  ms: z.number().nonnegative(),
  /** `ok`, the error class, or `invalid_answer` for a model answer that failed its node's schema. */
  outcome: z.string(),
});
export type CallRecord = z.infer<typeof CallRecord>;

export const RunSummary = z.object({
  runId: z.string(),
  agentId: z.string(),
  /** `task:<hash>` of the normalised task text, or `graph:<hash>` of a fixed graph. */
  fingerprint: z.string(),
  status: z.string(),
  /** The run error's code when it did not succeed. */
  error: z.string().optional(),
  finishedAt: z.string(),
  durationMs: z.number().nonnegative(),
  tokens: z.number().int().nonnegative(),
  /** At most {@link MAX_CALLS}, failures first kept; `moreCalls` counts the ones left out. */
  calls: z.array(CallRecord),
  moreCalls: z.number().int().nonnegative().optional(),
  /** Lessons that changed how this run was planned or executed (their ids). */
  lessons: z.array(z.string()),
});
export type RunSummary = z.infer<typeof RunSummary>;

/** Calls kept in one summary: the hot set stays bounded however large a run is. */
export const MAX_CALLS = 200;

const hash = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** Lower case, single spaces: the same request typed twice gets the same fingerprint. */
export const normaliseTask = (task: string): string => task.trim().toLowerCase().replace(/\s+/g, ' ');

export function fingerprintOf(doc: Pick<RunDocument, 'task' | 'graph'>): string {
  return doc.task !== null
    ? `task:${hash(normaliseTask(doc.task))}`
    : `graph:${hash(JSON.stringify(doc.graph))}`;
}

/** How a call ended, as the rules read it. */
export const outcomeOf = (error: NodeErrorData | undefined): string =>
  error === undefined
    ? 'ok'
    : error.code === 'validation' && error.invalidAnswer
      ? INVALID_ANSWER
      : error.code;

/** The outcome of a model call whose answer failed its node's schema. */
export const INVALID_ANSWER = 'invalid_answer';

/** The summary of a settled run, from its document (or the part of it the summary reads). */
export function summarize(
  doc: Pick<
    RunDocument,
    | 'runId'
    | 'agentId'
    | 'tenant'
    | 'task'
    | 'graph'
    | 'finishedAt'
    | 'createdAt'
    | 'status'
    | 'error'
    | 'usage'
  > & {
    /** Each node's attempts: a run document's nodes, or what `summaryFacts` reads of them. */
    readonly nodes: Readonly<Record<string, { readonly attempts: readonly AttemptRecord[] }>>;
  },
  planningLessons: readonly string[] = [],
): RunSummary {
  const calls: CallRecord[] = [];
  const lessons = new Set(planningLessons);
  for (const [id, node] of Object.entries(doc.nodes)) {
    for (const attempt of node.attempts) {
      for (const lesson of attempt.lessons ?? []) lessons.add(lesson);
      if (attempt.tool === undefined) continue;
      calls.push({
        node: id,
        tool: attempt.tool,
        target: attempt.target ?? '-',
        ms: attempt.durationMs,
        outcome: outcomeOf(attempt.error),
      });
    }
  }
  // Failures are what reflection learns from: they are kept first when a run made too many calls.
  const kept =
    calls.length <= MAX_CALLS
      ? calls
      : [...calls.filter((c) => c.outcome !== 'ok'), ...calls.filter((c) => c.outcome === 'ok')].slice(
          0,
          MAX_CALLS,
        );
  const finishedAt = doc.finishedAt ?? new Date().toISOString();
  return {
    runId: doc.runId,
    // Memory is per agent within its tenant.
    agentId: scopedName(doc.tenant ?? DEFAULT_TENANT, doc.agentId),
    fingerprint: fingerprintOf(doc),
    status: doc.status,
    ...(doc.error ? { error: doc.error.code } : {}),
    finishedAt,
    durationMs: Math.max(0, Date.parse(finishedAt) - Date.parse(doc.createdAt)),
    tokens: doc.usage.totalTokens,
    calls: kept,
    ...(calls.length > kept.length ? { moreCalls: calls.length - kept.length } : {}),
    lessons: [...lessons],
  };
}
