/**
 * The tool catalog in the order prefer lessons give it: a tool a `prefer` lesson in effect prefers
 * is listed before the tool it is preferred over; every other tool keeps the catalog's order (by
 * name). A planner reads a catalog top down, and the lesson's own line in its prompt says why.
 * Pure.
 */
import type { Lesson } from '../memory/lesson.js';
import type { ToolCatalog } from '../tools/tool-catalog.js';

/**
 * Orders `catalog` by the `prefer` lessons among `lessons` (those in effect). A preference between
 * two services of one tool does not move the tool. Lessons count most confident first; one that
 * contradicts those before it (B over A once A is over B, directly or through other tools) is left
 * out. The catalog keeps its version: the lessons version, recorded beside it, says the order.
 */
export function orderByPreference(catalog: ToolCatalog, lessons: readonly Lesson[]): ToolCatalog {
  const names = catalog.tools.map((t) => t.name);
  // Tool → the tools listed after it.
  const after = new Map<string, Set<string>>(names.map((n) => [n, new Set()]));
  /** Whether `to` is listed after `from` already, directly or through other tools. */
  const reaches = (from: string, to: string): boolean => {
    const seen = new Set<string>();
    const stack = [from];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      if (n === to) return true;
      for (const next of after.get(n) ?? []) {
        if (seen.has(next)) continue;
        seen.add(next);
        stack.push(next);
      }
    }
    return false;
  };
  const preferences = lessons
    .filter((l) => l.kind === 'prefer' && l.scope.tool !== undefined && l.scope.overTool !== undefined)
    .sort((a, b) => b.confidence - a.confidence);
  let moved = false;
  for (const { scope } of preferences) {
    const [better, worse] = [scope.tool!, scope.overTool!];
    if (better === worse || !after.has(better) || !after.has(worse) || reaches(worse, better)) continue;
    after.get(better)!.add(worse);
    moved = true;
  }
  if (!moved) return catalog;
  // In catalog order, each tool right after the tools preferred to it (placed first, likewise):
  // a preferred tool moves up to the one it is preferred over, and the rest stay where they were.
  const ahead = new Map<string, string[]>(names.map((n) => [n, []]));
  for (const n of names) for (const worse of after.get(n)!) ahead.get(worse)!.push(n);
  const order: string[] = [];
  const placed = new Set<string>();
  const place = (n: string): void => {
    if (placed.has(n)) return;
    placed.add(n);
    for (const first of ahead.get(n)!) place(first);
    order.push(n);
  };
  for (const n of names) place(n);
  const byName = new Map(catalog.tools.map((t) => [t.name, t]));
  return { ...catalog, tools: order.map((n) => byName.get(n)!) };
}
