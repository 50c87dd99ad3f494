/**
 * How lessons live: a new finding starts on probation and takes no effect; it becomes active once
 * enough distinct cases support it with enough confidence and a later reflection finds runs that
 * ended after it was proposed still supporting it; support found again strengthens it; a lesson no
 * reflection supports for a while decays and is retired. Pinned lessons are left as they are; a
 * retired one stays retired until runs that finished after its retirement support it, and then
 * starts over on probation. Pure.
 */
import { createHash } from 'node:crypto';
import { isInEffect, type Lesson, type LessonCandidate, type LessonScope } from './lesson.js';

export interface LifecycleSettings {
  /** Distinct supporting runs an active lesson needs. @defaultValue 3 */
  readonly minCases: number;
  /** Confidence an active lesson needs. @defaultValue 0.6 */
  readonly minConfidence: number;
  /**
   * Supporting runs that ended after a lesson was proposed (its `createdAt`) it needs before it
   * takes effect: its probation. 0: a finding with enough support takes effect at once.
   * @defaultValue 2
   */
  readonly probationRuns: number;
  /** Reflections without a case before confidence decays. @defaultValue 3 */
  readonly decayAfter: number;
  /** Confidence is multiplied by this at each decay. @defaultValue 0.5 */
  readonly decayFactor: number;
  /** A decayed lesson below this confidence is retired. @defaultValue 0.3 */
  readonly retireBelow: number;
}

export const DEFAULT_LIFECYCLE: LifecycleSettings = {
  minCases: 3,
  minConfidence: 0.6,
  probationRuns: 2,
  decayAfter: 3,
  decayFactor: 0.5,
  retireBelow: 0.3,
};

/** The same rule about the same scope is the same lesson, whenever it is found. */
export function lessonId(agentId: string, rule: string, scope: LessonScope): string {
  const over = scope.overTool === undefined ? [] : [scope.overTool, scope.overHost ?? ''];
  const key = JSON.stringify([rule, scope.tool ?? '', scope.host ?? '', scope.node ?? '', ...over]);
  return `${agentId}.${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
}

/** Supporting runs a lesson keeps (the latest). */
export const EVIDENCE_KEPT = 20;
const round = (n: number): number => Math.round(n * 1000) / 1000;

/**
 * Whether a lesson on probation may take effect: enough support, and enough of it from runs that
 * ended after the lesson was proposed — the pattern outlived the reflection that found it.
 */
const qualifies = (
  l: Pick<Lesson, 'cases' | 'confidence' | 'evidence' | 'createdAt'>,
  s: LifecycleSettings,
  finishedAt: ReadonlyMap<string, string>,
): boolean =>
  l.cases >= s.minCases &&
  l.confidence >= s.minConfidence &&
  l.evidence.filter((run) => (finishedAt.get(run) ?? '') > l.createdAt).length >= s.probationRuns;

/**
 * One reflection over `lessons` (the agent's, every status) with what the rules found now.
 * Returns every lesson after it and whether anything that matters to planning or execution
 * (status, statement, effect) changed: only then does the agent's lessons version move.
 */
export function reflectLessons(
  agentId: string,
  lessons: readonly Lesson[],
  candidates: readonly LessonCandidate[],
  now: string,
  version: number,
  settings: LifecycleSettings = DEFAULT_LIFECYCLE,
  /** Negative feedback on runs that applied each lesson, since the last reflection: cases against it. */
  against: ReadonlyMap<string, number> = new Map(),
  /**
   * Lessons applied by runs that succeeded since the last reflection: cases for them, so they do
   * not decay (a template lesson that works removes the very failures that made it).
   */
  used: ReadonlySet<string> = new Set(),
  /** When each run of the record finished (ISO): what tells evidence newer than a retirement. */
  finishedAt: ReadonlyMap<string, string> = new Map(),
): { lessons: Lesson[]; changed: boolean } {
  const byId = new Map(lessons.map((l) => [l.id, l]));
  const found = new Set<string>();
  let changed = false;
  const next = version + 1;
  /**
   * A lesson's version after a change: the next one when the change is in effect (the agent's
   * version moves), the current one otherwise. Never past the agent's version: the store keeps a
   * lesson whose version is past the one a reflection read, as an override made meanwhile.
   */
  const stamp = (effective: boolean): number => (effective ? next : version);
  for (const c of candidates) {
    const id = lessonId(agentId, c.rule, c.scope);
    found.add(id);
    const old = byId.get(id);
    if (old?.status === 'pinned') continue;
    // A retired lesson (an operator's, or decayed) counts only what happened after its retirement:
    // the runs that retired it are still in the record, and must not bring it straight back.
    const returning = old?.status === 'retired';
    const since = returning ? (old.retiredAt ?? old.updatedAt) : old?.retiredAt;
    const support =
      since === undefined ? c.evidence : c.evidence.filter((run) => (finishedAt.get(run) ?? '') > since);
    if (returning && support.length === 0) continue;
    const prior = returning ? [] : (old?.evidence ?? []);
    const evidence = [...new Set([...support, ...prior])].slice(0, EVIDENCE_KEPT);
    const cases = Math.max(returning ? 0 : (old?.cases ?? 0), new Set([...support, ...prior]).size);
    const confidence = round(Math.max(c.confidence, old && !returning ? old.confidence : 0));
    const base: Lesson = {
      id,
      agentId,
      kind: c.kind,
      rule: c.rule,
      scope: c.scope,
      statement: c.statement,
      cases,
      confidence,
      status: old?.status === 'active' ? 'active' : 'probation',
      evidence,
      ...(c.effect ? { effect: c.effect } : {}),
      missed: 0,
      ...(since !== undefined ? { retiredAt: since } : {}),
      createdAt: old && !returning ? old.createdAt : now,
      updatedAt: now,
      version: old?.version ?? next,
    };
    // A returning lesson spends this reflection on probation, whatever its support.
    if (base.status === 'probation' && !returning && qualifies(base, settings, finishedAt))
      base.status = 'active';
    const matters =
      !old ||
      old.status !== base.status ||
      old.statement !== base.statement ||
      JSON.stringify(old.effect ?? null) !== JSON.stringify(base.effect ?? null);
    if (matters) {
      // A probation lesson has no effect: creating or changing one leaves planning as it was.
      const effective = (old !== undefined && isInEffect(old)) || isInEffect(base);
      if (effective) changed = true;
      base.version = stamp(effective);
    }
    byId.set(id, base);
  }
  // Each negative feedback on a run that applied a lesson takes a fifth of its confidence.
  for (const [id, count] of against) {
    const lesson = byId.get(id);
    if (!lesson || lesson.status === 'pinned' || lesson.status === 'retired') continue;
    const confidence = round(lesson.confidence * Math.pow(0.8, count));
    const retired = confidence < settings.retireBelow;
    byId.set(id, {
      ...lesson,
      confidence,
      updatedAt: now,
      ...(retired
        ? { status: 'retired' as const, version: stamp(lesson.status === 'active'), retiredAt: now }
        : {}),
    });
    if (retired && lesson.status === 'active') changed = true;
  }
  for (const original of lessons) {
    const old = byId.get(original.id) ?? original;
    if (found.has(old.id) || old.status === 'pinned' || old.status === 'retired') continue;
    if (used.has(old.id)) {
      byId.set(old.id, { ...old, missed: 0 });
      continue;
    }
    const missed = old.missed + 1;
    let confidence = old.confidence;
    if (missed >= settings.decayAfter) confidence = round(confidence * settings.decayFactor);
    const retired = confidence < settings.retireBelow;
    const updated: Lesson = {
      ...old,
      missed,
      confidence,
      ...(retired
        ? {
            status: 'retired' as const,
            version: stamp(original.status === 'active'),
            updatedAt: now,
            retiredAt: now,
          }
        : {}),
    };
    if (retired && original.status === 'active') changed = true;
    byId.set(old.id, updated);
  }
  return { lessons: [...byId.values()], changed };
}
