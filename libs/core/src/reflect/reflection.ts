/**
 * The reflect loop (L4): reads an agent's record (its hot set of run summaries and the negative
 * feedback since the last reflection), lets the rules propose lessons, and moves every lesson
 * through its lifecycle; then stores the result in one step. Deterministic: no model is asked.
 */
import type { Job, Queue } from 'bullmq';
import type { Logger } from 'pino';
import { reflectLessons, type LifecycleSettings } from '../memory/lesson-lifecycle.js';
import { candidateLessons, type RuleSettings } from '../memory/lesson-rules.js';
import { REFLECT_JOB, ReflectJobData, enqueueReflection } from '../queues/reflect-jobs.js';
import type { MemoryStore } from '../state/memory-store.js';
import { metrics } from '../telemetry/metrics.js';

export interface ReflectionDeps {
  readonly memory: MemoryStore;
  readonly reflectQueue: Queue;
  readonly rules: RuleSettings;
  readonly lifecycle: LifecycleSettings;
  readonly logger: Logger;
}

export interface ReflectionResult {
  readonly agentId: string;
  readonly candidates: number;
  readonly version: number;
  readonly changed: boolean;
  readonly lessons: Record<string, number>;
}

/** One reflection of one agent. */
export async function reflect(deps: ReflectionDeps, agentId: string): Promise<ReflectionResult> {
  const started = performance.now();
  const [hot, { version, lessons }, since] = await Promise.all([
    deps.memory.hotSet(agentId),
    deps.memory.lessons(agentId),
    deps.memory.sinceReflection(agentId),
  ]);
  const candidates = candidateLessons(hot, deps.rules);
  const now = new Date().toISOString();
  const result = reflectLessons(
    agentId,
    lessons,
    candidates,
    now,
    version,
    deps.lifecycle,
    since.against,
    since.used,
    new Map(hot.map((run) => [run.runId, run.finishedAt])),
  );
  const after = await deps.memory.saveReflection(agentId, result.lessons, result.changed, now, version);
  const counts: Record<string, number> = {};
  for (const l of result.lessons) counts[l.status] = (counts[l.status] ?? 0) + 1;
  metrics.reflections.inc();
  metrics.reflectionDuration.observe((performance.now() - started) / 1000);
  deps.logger.info({ agentId, candidates: candidates.length, version: after, lessons: counts }, 'reflected');
  return { agentId, candidates: candidates.length, version: after, changed: result.changed, lessons: counts };
}

/** The reflect queue's processor: one agent's reflection, or the periodic sweep over every agent. */
export async function executeReflectJob(deps: ReflectionDeps, job: Job): Promise<unknown> {
  if (job.name === REFLECT_JOB.sweep) {
    const due: string[] = [];
    for (const agentId of await deps.memory.agents()) {
      if ((await deps.memory.reflectionState(agentId)).sinceReflection === 0) continue;
      await enqueueReflection(deps.reflectQueue, agentId, 'interval');
      due.push(agentId);
    }
    return { reflections: due };
  }
  const data = ReflectJobData.parse(job.data);
  return reflect(deps, data.agentId);
}
