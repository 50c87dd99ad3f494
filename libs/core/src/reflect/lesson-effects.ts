/**
 * Lessons where a call is dispatched: a hard lesson refuses a call to the service it is about
 * (`blocked_by_lesson`, no network call) except for one probe per interval, and a probe that
 * succeeds retires it; template lessons change the call's parameters — its timeout when the node
 * sets none, more retries spaced further apart when the service answers `rate_limited`, and, for a
 * model node whose answers keep failing its schema, temperature 0 and the schema in the prompt.
 */
import type { NodeErrorData } from '../errors/node-error.js';
import { MODEL_CALL_TOOL } from '../memory/lesson-rules.js';
import type { ChatCall } from '../model/model-client.js';
import type { MemoryStore } from '../state/memory-store.js';
import { metrics } from '../telemetry/metrics.js';
import type { LessonBook } from './lesson-book.js';

export interface CallLessonDeps {
  readonly book: LessonBook;
  readonly memory: MemoryStore;
  /** How often one call goes through to a service a hard lesson blocks. @defaultValue 300000 */
  readonly probeIntervalMs: number;
  /**
   * The most retries a template lesson gives a call: node jobs are enqueued with room for them.
   * @defaultValue 4
   */
  readonly maxRetries: number;
}

/** What a template lesson does to a call's `rate_limited` failures, once one happens. */
export interface RateLimitFix {
  readonly lessonId: string;
  readonly retries: number;
  readonly backoffFloorMs: number;
}

export interface CallLessons {
  /** The call is refused. */
  readonly blocked?: NodeErrorData;
  /** This call is the probe of the hard lesson with this id. */
  readonly probe?: string;
  /** The timeout a template lesson gives the call. */
  readonly timeoutMs?: number;
  /** How a `rate_limited` failure of the call is retried. */
  readonly rateLimit?: RateLimitFix;
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
  const templates = await deps.book.templates(agentId, tool, target);
  const timeout = templates.find((l) => l.effect?.timeoutMs !== undefined);
  const limited = templates.find((l) => l.effect?.retries !== undefined);
  if (timeout) metrics.lessonApplications.inc({ kind: 'template' });
  return {
    ...(timeout ? { timeoutMs: timeout.effect!.timeoutMs! } : {}),
    ...(limited
      ? {
          rateLimit: {
            lessonId: limited.id,
            retries: Math.min(limited.effect!.retries!, deps.maxRetries),
            backoffFloorMs: limited.effect!.backoffFloorMs ?? 0,
          },
        }
      : {}),
    // A rate-limit fix counts as applied only when a failure is retried under it.
    applied: timeout ? [timeout.id] : [],
  };
}

/** A rate-limit fix was used: a `rate_limited` failure is retried under it. */
export function rateLimitFixUsed(): void {
  metrics.lessonApplications.inc({ kind: 'template' });
}

/**
 * A model call as template lessons about its node's answers shape it: temperature 0 and the
 * schema repeated in a system message. `applied` names the lesson, when one changed the call.
 */
export async function lessonsForModelCall<C extends Pick<ChatCall, 'messages' | 'schema' | 'temperature'>>(
  deps: CallLessonDeps,
  agentId: string,
  model: string,
  node: string,
  call: C,
): Promise<{ call: C; applied?: string }> {
  if (!call.schema) return { call };
  const lesson = (await deps.book.templates(agentId, MODEL_CALL_TOOL, model, node)).find(
    (l) => l.scope.node === node && (l.effect?.schemaInPrompt || l.effect?.temperature !== undefined),
  );
  if (!lesson) return { call };
  metrics.lessonApplications.inc({ kind: 'template' });
  const effect = lesson.effect!;
  const reminder = `Answer with one JSON value that matches this JSON schema exactly, and nothing else:\n${JSON.stringify(call.schema.schema)}`;
  return {
    call: {
      ...call,
      ...(effect.temperature !== undefined ? { temperature: effect.temperature } : {}),
      ...(effect.schemaInPrompt
        ? { messages: [...call.messages, { role: 'system' as const, content: reminder }] }
        : {}),
    },
    applied: lesson.id,
  };
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
