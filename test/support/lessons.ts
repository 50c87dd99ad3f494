/** Lesson records as a reflection saves them, for suites that put a lesson in place before they test its effect. */
import { lessonId, type Lesson } from '@tetraloop/core/memory';

/** What a test says of a lesson: whose, which rule, where, and whatever it does not take the default of. */
export type LessonFields = Pick<Lesson, 'agentId' | 'rule' | 'scope' | 'statement'> &
  Partial<Omit<Lesson, 'id' | 'agentId' | 'rule' | 'scope' | 'statement'>>;

/**
 * A whole lesson, made at `now`: by default an active soft lesson of three cases. One place for the
 * fields a suite does not care about, so each writes only the ones it tests.
 */
export function lessonRecord(fields: LessonFields, now: string): Lesson {
  return {
    id: lessonId(fields.agentId, fields.rule, fields.scope),
    kind: 'soft',
    cases: 3,
    confidence: 0.6,
    status: 'active',
    evidence: ['a', 'b', 'c'],
    missed: 0,
    createdAt: now,
    updatedAt: now,
    version: 1,
    ...fields,
  };
}

/** `agentId`'s lesson that x.test is flaky as a reflection first proposes it (one case, on probation): one to act on by id. */
export const proposedLesson = (agentId: string, now: string): Lesson =>
  lessonRecord(
    {
      agentId,
      rule: 'service-flaky',
      scope: { tool: 'http', host: 'x.test' },
      statement: 'x.test often fails',
      cases: 1,
      confidence: 0.2,
      status: 'probation',
      evidence: ['r'],
      version: 0,
    },
    now,
  );
