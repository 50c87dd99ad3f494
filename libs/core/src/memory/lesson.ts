/**
 * A lesson: what the reflect loop learned from the record, with its evidence and its standing.
 * Kinds: `hard` blocks (a call to a broken service is refused before it goes out), `soft` advises
 * (a line in the planner's and the agent's prompt), `template` changes a call's parameters when it
 * is dispatched, `prefer` ranks (a tool or service that works before one that fails for the same
 * step: first in the planner's catalog, and a line in its prompt). Only `active` and `pinned`
 * lessons take effect. Types and schemas only.
 */
import { z } from 'zod';

export const LESSON_KINDS = ['hard', 'soft', 'template', 'prefer'] as const;
export type LessonKind = (typeof LESSON_KINDS)[number];

/** `probation`: learned, no effect yet; `pinned`: active and left alone by reflection. */
export const LESSON_STATUSES = ['probation', 'active', 'pinned', 'retired'] as const;
export type LessonStatus = (typeof LESSON_STATUSES)[number];

/** What a lesson is about: a tool, the service it reaches, one node's calls; for `prefer`, the one preferred. */
export const LessonScope = z.object({
  tool: z.string().optional(),
  host: z.string().optional(),
  node: z.string().optional(),
  /** A `prefer` lesson's other side: the tool it is preferred over… */
  overTool: z.string().optional(),
  /** …and that tool's service, when it names one. */
  overHost: z.string().optional(),
});
export type LessonScope = z.infer<typeof LessonScope>;

export const Lesson = z.object({
  /** `<agentId>.<hash of rule and scope>`: the same finding always gets the same id. */
  id: z.string(),
  agentId: z.string(),
  kind: z.enum(LESSON_KINDS),
  /** The rule that found it. */
  rule: z.string(),
  scope: LessonScope,
  statement: z.string(),
  /** Distinct runs that support it. */
  cases: z.number().int().nonnegative(),
  confidence: z.number().min(0).max(1),
  status: z.enum(LESSON_STATUSES),
  /** The latest supporting run ids (at most 20). */
  evidence: z.array(z.string()),
  /** What a template lesson changes where a call is dispatched. */
  effect: z
    .object({
      /** The call's timeout (ms), when its node sets none. */
      timeoutMs: z.number().int().positive().optional(),
      /** Retries of a `rate_limited` failure, when more than the node's or the deployment's. */
      retries: z.number().int().nonnegative().max(20).optional(),
      /** The shortest delay before a retry of a `rate_limited` failure (ms). */
      backoffFloorMs: z.number().int().nonnegative().optional(),
      /** A model call's sampling temperature. */
      temperature: z.number().min(0).max(2).optional(),
      /** The node's JSON schema is repeated in the model's prompt. */
      schemaInPrompt: z.boolean().optional(),
    })
    .optional(),
  /**
   * When it was last retired (absent: never, or by an operator before this was kept, when its
   * `updatedAt` says it). A lesson found again counts only runs that finished after it.
   */
  retiredAt: z.string().optional(),
  /** Reflections in a row that found no case for it; past the limit its confidence decays. */
  missed: z.number().int().nonnegative(),
  createdAt: z.string(),
  updatedAt: z.string(),
  /** The agent's lessons version when the lesson last changed. */
  version: z.number().int().nonnegative(),
});
export type Lesson = z.infer<typeof Lesson>;

/** What a rule proposes; reflection turns it into a new lesson or strengthens an existing one. */
export interface LessonCandidate {
  readonly kind: LessonKind;
  readonly rule: string;
  readonly scope: LessonScope;
  readonly statement: string;
  /** Supporting run ids, newest first. */
  readonly evidence: readonly string[];
  /** How strongly the record supports it, 0–1. */
  readonly confidence: number;
  readonly effect?: Lesson['effect'];
}

export const isInEffect = (lesson: Pick<Lesson, 'status'>): boolean =>
  lesson.status === 'active' || lesson.status === 'pinned';
