/**
 * Memory and the reflect loop over HTTP: rate a run, ask for a reflection, read and override an
 * agent's lessons, read its memory (the hot set and the per-service counters).
 */
import type { Request, RequestHandler, Response } from 'express';
import { scopedName, unscopeName } from '@tetraloop/core/domain';
import type { MemoryServices } from '@tetraloop/core/runtime';
import type { RunStore } from '@tetraloop/core/state';
import type { z } from 'zod';
import type { AgentLessons, AgentMemory, FeedbackAccepted, ReflectAccepted } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { AgentId, FeedbackBody, LessonId, LessonPatch, LessonsQuery, MemoryQuery } from './requests.js';
import type { RouteName } from './route-table.js';
import { ownRunId } from './runs-router.js';

export interface MemoryRouterDeps {
  /** Absent with `TETRALOOP_REFLECT=off`: every route then answers 409 `reflect_off`. */
  readonly memory?: MemoryServices;
  readonly store: RunStore;
}

function param<T>(schema: z.ZodType<T>, req: Request, name: string): T {
  const parsed = schema.safeParse(req.params[name]);
  if (!parsed.success) throw zodToHttp(parsed.error, ['params', name]);
  return parsed.data;
}

/** The agent the request names, within the caller's tenant: as named and as memory stores it. */
function agentOf(req: Request, res: Response): { agentId: string; stored: string } {
  const agentId = param(AgentId, req, 'agentId');
  return { agentId, stored: scopedName(callerOf(res).tenant, agentId) };
}

export function memoryHandlers(deps: MemoryRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const memory = (): MemoryServices => {
    if (!deps.memory)
      throw new HttpError(409, 'reflect_off', 'the reflect loop is off (TETRALOOP_REFLECT=off)');
    return deps.memory;
  };

  const feedback: RequestHandler = async (req, res) => {
    const m = memory();
    const runId = await ownRunId(deps.store, req, res);
    const body = FeedbackBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    if (!(await m.service.feedback(runId, body.data.score, body.data.comment))) {
      throw new HttpError(404, 'run_not_found', 'no such run');
    }
    res.status(202).json({ runId, score: body.data.score } satisfies FeedbackAccepted);
  };

  const reflect: RequestHandler = async (req, res) => {
    const { agentId, stored } = agentOf(req, res);
    const jobId = await memory().service.reflect(stored, 'request');
    res.status(202).json({ agentId, jobId } satisfies ReflectAccepted);
  };

  const lessonsOf: RequestHandler = async (req, res) => {
    const { agentId, stored } = agentOf(req, res);
    const query = LessonsQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const { version, lessons } = await memory().store.lessons(stored);
    const status = query.data.status;
    res.json({
      agentId,
      version,
      lessons: status ? lessons.filter((l) => l.status === status) : lessons,
    } satisfies AgentLessons);
  };

  const patch: RequestHandler = async (req, res) => {
    const id = param(LessonId, req, 'id');
    const body = LessonPatch.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const m = memory();
    const agentId = id.slice(0, id.lastIndexOf('.'));
    // Another tenant's lesson is no lesson at all.
    if (unscopeName(agentId).tenant !== callerOf(res).tenant) {
      throw new HttpError(404, 'lesson_not_found', 'no such lesson');
    }
    const lesson = await m.store.setStatus(agentId, id, body.data.status, new Date().toISOString());
    if (!lesson) throw new HttpError(404, 'lesson_not_found', 'no such lesson');
    m.book.forget(agentId);
    res.json(lesson);
  };

  const memoryOf: RequestHandler = async (req, res) => {
    const { agentId, stored } = agentOf(req, res);
    const query = MemoryQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const m = memory();
    const [runs, services, reflection] = await Promise.all([
      m.store.hotSet(stored, query.data.limit),
      m.store.stats(stored),
      m.store.reflectionState(stored),
    ]);
    res.json({ agentId, runs, services, reflection } satisfies AgentMemory);
  };

  return {
    'runs.feedback': feedback,
    'agents.reflect': reflect,
    'agents.lessons': lessonsOf,
    'lessons.patch': patch,
    'agents.memory': memoryOf,
  };
}
