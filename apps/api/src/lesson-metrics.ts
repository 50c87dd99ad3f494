/**
 * The lessons gauge, `tetraloop_lessons{kind,status}`: every agent's lessons counted by kind and
 * status when /metrics is scraped, like the queue depths. Labels are the fixed kinds and statuses
 * (16 series), never an agent or lesson id.
 */
import { LESSON_KINDS, LESSON_STATUSES } from '@tetraloop/core/memory';
import type { MemoryStore } from '@tetraloop/core/state';
import { metrics } from '@tetraloop/core/telemetry';

/** Agents whose lessons are read at once (one HGET and one HGETALL each, pipelined on the connection). */
const AGENTS_AT_ONCE = 64;

/**
 * Counts every agent's lessons and sets the gauge. The gauge changes only once every agent has been
 * read, so a failed read (Redis away) leaves the last complete count; the error is the caller's.
 */
export async function refreshLessonGauge(store: MemoryStore): Promise<void> {
  const counts = new Map<string, number>();
  const agents = await store.agents();
  for (let i = 0; i < agents.length; i += AGENTS_AT_ONCE) {
    const read = await Promise.all(agents.slice(i, i + AGENTS_AT_ONCE).map((a) => store.lessons(a)));
    for (const { lessons } of read) {
      for (const { kind, status } of lessons)
        counts.set(`${kind}|${status}`, (counts.get(`${kind}|${status}`) ?? 0) + 1);
    }
  }
  // Every kind and status is set, zeros included, so a series that drops to none reads 0.
  for (const kind of LESSON_KINDS) {
    for (const status of LESSON_STATUSES)
      metrics.lessons.set({ kind, status }, counts.get(`${kind}|${status}`) ?? 0);
  }
}
