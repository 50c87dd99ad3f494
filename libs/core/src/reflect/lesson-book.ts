/**
 * The lessons in effect for each agent, as a process sees them: read from memory at most once per
 * refresh interval, so applying lessons costs no Redis call per node. A lesson that changes takes
 * effect within that interval.
 */
import { isInEffect, type Lesson } from '../memory/lesson.js';
import type { MemoryStore } from '../state/memory-store.js';

interface Entry {
  readonly at: number;
  readonly version: number;
  readonly lessons: readonly Lesson[];
}

export class LessonBook {
  private readonly entries = new Map<string, Promise<Entry>>();

  constructor(
    private readonly memory: MemoryStore,
    /** @defaultValue 1000 */
    private readonly refreshMs = 1000,
  ) {}

  /** The agent's lessons in effect and its lessons version. */
  async inEffect(agentId: string): Promise<{ version: number; lessons: readonly Lesson[] }> {
    const cached = this.entries.get(agentId);
    if (cached) {
      const entry = await cached.catch(() => undefined);
      if (entry && Date.now() - entry.at < this.refreshMs) return entry;
    }
    const loading = this.memory.lessons(agentId).then(({ version, lessons }) => ({
      at: Date.now(),
      version,
      lessons: lessons.filter(isInEffect),
    }));
    this.entries.set(agentId, loading);
    return loading;
  }

  /** Forgets what was read for `agentId` (a lesson of it just changed here). */
  forget(agentId: string): void {
    this.entries.delete(agentId);
  }

  /** The hard lesson that blocks calls of `tool` to `target`, if one is in effect. */
  async blocking(agentId: string, tool: string, target: string): Promise<Lesson | undefined> {
    const { lessons } = await this.inEffect(agentId);
    return lessons.find((l) => l.kind === 'hard' && l.scope.tool === tool && l.scope.host === target);
  }

  /**
   * The template lessons in effect for calls of `tool` to `target` (from node `node`, for lessons
   * about one node's calls).
   */
  async templates(agentId: string, tool: string, target: string, node?: string): Promise<Lesson[]> {
    const { lessons } = await this.inEffect(agentId);
    return lessons.filter(
      (l) =>
        l.kind === 'template' &&
        l.effect !== undefined &&
        l.scope.tool === tool &&
        l.scope.host === target &&
        (l.scope.node === undefined || l.scope.node === node),
    );
  }
}
