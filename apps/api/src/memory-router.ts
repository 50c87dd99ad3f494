/**
 * Memory and the reflect loop over HTTP: rate a run, ask for a reflection, read and override an
 * agent's lessons, read its memory (the hot set and the per-service counters).
 */
import { Router, type Request } from 'express';
import { LESSON_STATUSES, type MemoryServices } from '@tetraloop/core';
import { z } from 'zod';
import { HttpError, zodToHttp } from './http-errors.js';

const AgentId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match [A-Za-z0-9_-]{1,64}');
/** `<agentId>.<12 hex>`: the agent a lesson belongs to is part of its id. */
const LessonId = z.string().regex(/^[A-Za-z0-9_-]{1,64}\.[0-9a-f]{12}$/, 'must be <agentId>.<12 hex digits>');

export const FeedbackBody = z.strictObject({
  score: z.number().min(-1).max(1),
  comment: z.string().max(2000).optional(),
});
export const LessonPatch = z.strictObject({ status: z.enum(['active', 'retired', 'pinned']) });
const LessonsQuery = z.strictObject({ status: z.enum(LESSON_STATUSES).optional() });
const MemoryQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(10_000).default(200) });

export interface MemoryRouterDeps {
  /** Absent with `TETRALOOP_REFLECT=off`: every route then answers 409 `reflect_off`. */
  readonly memory?: MemoryServices;
}

function param<T>(schema: z.ZodType<T>, req: Request, name: string): T {
  const parsed = schema.safeParse(req.params[name]);
  if (!parsed.success) throw zodToHttp(parsed.error, ['params', name]);
  return parsed.data;
}

export function memoryRouter(deps: MemoryRouterDeps): Router {
  const router = Router();
  const memory = (): MemoryServices => {
    if (!deps.memory)
      throw new HttpError(409, 'reflect_off', 'the reflect loop is off (TETRALOOP_REFLECT=off)');
    return deps.memory;
  };

  router.post('/runs/:id/feedback', async (req, res) => {
    const m = memory();
    const runId = z.uuid().safeParse(req.params.id);
    if (!runId.success) throw new HttpError(404, 'run_not_found', 'no such run');
    const body = FeedbackBody.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    if (!(await m.service.feedback(runId.data, body.data.score, body.data.comment))) {
      throw new HttpError(404, 'run_not_found', 'no such run');
    }
    res.status(202).json({ runId: runId.data, score: body.data.score });
  });

  router.post('/agents/:agentId/reflect', async (req, res) => {
    const agentId = param(AgentId, req, 'agentId');
    const jobId = await memory().service.reflect(agentId, 'request');
    res.status(202).json({ agentId, jobId });
  });

  router.get('/agents/:agentId/lessons', async (req, res) => {
    const agentId = param(AgentId, req, 'agentId');
    const query = LessonsQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const { version, lessons } = await memory().store.lessons(agentId);
    const status = query.data.status;
    res.json({ agentId, version, lessons: status ? lessons.filter((l) => l.status === status) : lessons });
  });

  router.patch('/lessons/:id', async (req, res) => {
    const id = param(LessonId, req, 'id');
    const body = LessonPatch.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const m = memory();
    const agentId = id.slice(0, id.lastIndexOf('.'));
    const lesson = await m.store.setStatus(agentId, id, body.data.status, new Date().toISOString());
    if (!lesson) throw new HttpError(404, 'lesson_not_found', 'no such lesson');
    m.book.forget(agentId);
    res.json(lesson);
  });

  router.get('/agents/:agentId/memory', async (req, res) => {
    const agentId = param(AgentId, req, 'agentId');
    const query = MemoryQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    const m = memory();
    const [runs, services, reflection] = await Promise.all([
      m.store.hotSet(agentId, query.data.limit),
      m.store.stats(agentId),
      m.store.reflectionState(agentId),
    ]);
    res.json({ agentId, runs, services, reflection });
  });

  return router;
}
