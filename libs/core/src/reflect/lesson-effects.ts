/**
 * Lessons where a call is dispatched: a hard lesson refuses a call to the service it is about
 * (`blocked_by_lesson`, no network call) except for one probe per interval, and a probe that
 * succeeds retires it; a template lesson sets the call's timeout when the node sets none.
 */
import type { NodeErrorData } from '../errors/node-error.js';
import type { MemoryStore } from '../state/memory-store.js';
import { metrics } from '../telemetry/metrics.js';
import type { LessonBook } from './lesson-book.js';

export interface CallLessonDeps {
  readonly book: LessonBook;
  readonly memory: MemoryStore;
  /** How often one call goes through to a service a hard lesson blocks. @defaultValue 300000 */
  readonly probeIntervalMs: number;
}

export interface CallLessons {
  /** The call is refused. */
  readonly blocked?: NodeErrorData;
  /** This call is the probe of the hard lesson with this id. */
  readonly probe?: string;
  /** The timeout a template lesson gives the call. */
  readonly timeoutMs?: number;
  /** Lessons applied to the call (their ids). */
  readonly applied: string[];
}

export async function lessonsForCall(
  deps: CallLessonDeps,
  agentId: string,
  tool: string,
  target: string,
): Promise<CallLessons> {
  const hard = await deps.book.blocking(agentId, tool, target);
  if (hard) {
    if (await deps.memory.claimProbe(agentId, hard.id, deps.probeIntervalMs)) {
      return { probe: hard.id, applied: [] };
    }
    metrics.lessonApplications.inc({ kind: 'hard' });
    return {
      blocked: {
        code: 'blocked_by_lesson',
        message: `blocked by lesson ${hard.id}: ${hard.statement}`,
        lessonId: hard.id,
      },
      applied: [hard.id],
    };
  }
  const template = await deps.book.template(agentId, tool, target);
  if (template?.effect?.timeoutMs === undefined) return { applied: [] };
  metrics.lessonApplications.inc({ kind: 'template' });
  return { timeoutMs: template.effect.timeoutMs, applied: [template.id] };
}

/** A probe's outcome: success means the service is back, and the hard lesson is retired. */
export async function probed(
  deps: CallLessonDeps,
  agentId: string,
  lessonId: string,
  ok: boolean,
): Promise<void> {
  if (!ok) return;
  await deps.memory.setStatus(agentId, lessonId, 'retired', new Date().toISOString());
  deps.book.forget(agentId);
}
