import { describe, expect, it } from 'vitest';
import type { Lesson, LessonScope } from '../memory/lesson.js';
import type { ToolCatalog } from '../tools/tool-catalog.js';
import { orderByPreference } from './preferred-tools.js';

const catalog: ToolCatalog = {
  tools: ['alpha', 'bravo', 'charlie', 'delta'].map((name) => ({ name, description: name, parameters: {} })),
  version: 'v1',
};
const prefer = (scope: LessonScope, confidence = 0.9, kind: Lesson['kind'] = 'prefer'): Lesson => ({
  id: `main.${scope.tool}-${scope.overTool}`,
  agentId: 'main',
  kind,
  rule: 'prefer',
  scope,
  statement: 'prefer',
  cases: 3,
  confidence,
  status: 'active',
  evidence: [],
  missed: 0,
  createdAt: '',
  updatedAt: '',
  version: 1,
});
const names = (c: ToolCatalog): string[] => c.tools.map((t) => t.name);

describe('the catalog as prefer lessons order it', () => {
  it('moves a preferred tool up to the one it is preferred over, and leaves the rest in place', () => {
    const ordered = orderByPreference(catalog, [
      prefer({ tool: 'delta', overTool: 'bravo', overHost: 'b.test' }),
    ]);
    expect(names(ordered)).toEqual(['alpha', 'delta', 'bravo', 'charlie']);
    // The version names the tool set; the lessons version says the order.
    expect(ordered.version).toBe('v1');
  });

  it('follows chains, and leaves out a preference that contradicts a more confident one', () => {
    const ordered = orderByPreference(catalog, [
      // bravo over delta contradicts delta over charlie over bravo, which are more confident.
      prefer({ tool: 'bravo', overTool: 'delta' }, 0.6),
      prefer({ tool: 'delta', overTool: 'charlie' }, 0.9),
      prefer({ tool: 'charlie', overTool: 'bravo' }, 0.8),
    ]);
    expect(names(ordered)).toEqual(['alpha', 'delta', 'charlie', 'bravo']);
  });

  it('keeps the order for a preference between services of one tool, other kinds, or unknown tools', () => {
    const same = prefer({ tool: 'bravo', host: 'a.test', overTool: 'bravo', overHost: 'b.test' });
    const soft = prefer({ tool: 'delta', overTool: 'alpha' }, 0.9, 'soft');
    const unknown = prefer({ tool: 'echo', overTool: 'alpha' });
    expect(orderByPreference(catalog, [same, soft, unknown])).toBe(catalog);
  });
});
