/**
 * What the rest of Tetraloop tells memory: a run settled (its summary goes into the agent's hot
 * set and counters, and the reflection triggers are checked), and a client rated a run.
 */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { scopedName } from '../domain/tenant.js';
import { summarize } from '../memory/run-summary.js';
import { enqueueReflection, type ReflectReason } from '../queues/reflect-jobs.js';
import type { MemoryStore } from '../state/memory-store.js';
import type { RunStore } from '../state/runs/run-store.js';

export interface ReflectTriggers {
  /** Reflect after this many settled runs of an agent. @defaultValue 50 */
  readonly everyRuns: number;
  /** Reflect after this many failed runs in a row. @defaultValue 3 */
  readonly failStreak: number;
  /** Reflect after this many failures of one service since the last reflection. @defaultValue 5 */
  readonly serviceFailures: number;
  /** Reflect after a run with at least this many nodes succeeded (a large task). @defaultValue 50 */
  readonly largeRunNodes: number;
  /** Reflect after a run that lasted at least this long succeeded (a large task). @defaultValue 600000 */
  readonly largeRunMs: number;
}

export const DEFAULT_TRIGGERS: ReflectTriggers = {
  everyRuns: 50,
  failStreak: 3,
  serviceFailures: 5,
  largeRunNodes: 50,
  largeRunMs: 600_000,
};

/**
 * Why a settled run asks for a reflection, if it does: enough runs since the last one, a streak of
 * failures, a failing service, or a large task completed (the seed lists it beside the failures:
 * what a long run learned about its tools is worth keeping while it is fresh). Pure.
 */
export function reflectReason(
  triggers: ReflectTriggers,
  recorded: { readonly sinceReflection: number; readonly failStreak: number; readonly worstService: number },
  run: { readonly status: string; readonly nodes: number; readonly durationMs: number },
): ReflectReason | undefined {
  if (recorded.sinceReflection >= triggers.everyRuns) return 'runs';
  if (recorded.failStreak >= triggers.failStreak) return 'failure-streak';
  if (recorded.worstService >= triggers.serviceFailures) return 'service-failures';
  const large = run.nodes >= triggers.largeRunNodes || run.durationMs >= triggers.largeRunMs;
  return run.status === 'succeeded' && large ? 'large-run' : undefined;
}

export interface MemoryServiceDeps {
  readonly store: RunStore;
  readonly memory: MemoryStore;
  readonly reflectQueue: Queue;
  readonly triggers: ReflectTriggers;
  readonly logger: Logger;
}

export class MemoryService {
  constructor(private readonly deps: MemoryServiceDeps) {}

  /**
   * Records a settled run in its agent's memory and asks for a reflection when a trigger fires.
   * Child runs (loop iterations over a nested graph) are part of their parent's record.
   */
  async recordSettled(runId: string, nodeIds?: readonly string[]): Promise<void> {
    // Given the nodes of the plan that settled it (the plan loop holds them), only what the summary
    // reads; otherwise (a run ended before it started) its document.
    const doc = nodeIds
      ? await this.deps.store.summaryFacts(runId, nodeIds)
      : await this.deps.store.document(runId);
    if (!doc?.finishedAt || doc.metadata?.parentRunId !== undefined) return;
    const summary = summarize(doc, doc.planning?.lessons ?? []);
    const recorded = await this.deps.memory.record(summary);
    const reason = reflectReason(this.deps.triggers, recorded, {
      status: doc.status,
      nodes: Object.keys(doc.nodes).length,
      durationMs: summary.durationMs,
    });
    if (reason) await this.reflect(summary.agentId, reason);
  }

  /** Asks for a reflection of the agent; answers its job id. */
  reflect(agentId: string, reason: ReflectReason): Promise<string> {
    this.deps.logger.debug({ agentId, reason }, 'reflection requested');
    return enqueueReflection(this.deps.reflectQueue, agentId, reason);
  }

  /**
   * A client's rating of a run (-1..1). It is kept as an event of the run; a negative one counts
   * against the lessons the run applied and asks for a reflection. False for an unknown run.
   */
  async feedback(runId: string, score: number, comment?: string): Promise<boolean> {
    const doc = await this.deps.store.document(runId);
    if (!doc) return false;
    await this.deps.store.appendEvent(runId, 'feedback', undefined, {
      score,
      ...(comment ? { comment } : {}),
    });
    if (score < 0) {
      const applied = summarize(doc, doc.planning?.lessons ?? []).lessons;
      const agent = scopedName(doc.tenant, doc.agentId);
      await this.deps.memory.feedbackAgainst(agent, applied);
      await this.reflect(agent, 'feedback');
    }
    return true;
  }
}
