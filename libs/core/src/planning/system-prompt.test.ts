import { mkdtempSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { assembleSystemPrompt } from './system-prompt.js';
import { BOOTSTRAP_FILES, capHeadTail, readWorkspace } from '../workspace/workspace.js';

describe('assembleSystemPrompt', () => {
  it('puts base, skills, tool catalog, bootstrap files, lessons and overrides in that order', () => {
    const prompt = assembleSystemPrompt({
      base: 'BASE',
      skills: [
        {
          name: 'alpha',
          description: 'first skill',
          tools: ['json'],
          body: 'ALPHA BODY',
          file: 'skills/a.md',
        },
        { name: 'beta', description: 'second skill', tools: [], body: 'BETA BODY', file: 'skills/b.md' },
      ],
      catalog: { version: 'v', tools: [{ name: 'json', description: 'd', parameters: {} }] },
      bootstrap: [
        { name: 'AGENTS.md', content: 'agents' },
        { name: 'USER.md', content: 'user' },
      ],
      lessons: ['first lesson', 'second lesson'],
      overrides: 'OVERRIDE',
    });
    const at = (s: string): number => prompt.indexOf(s);
    expect(at('BASE')).toBe(0);
    // Lessons come after the bootstrap files and before the overrides, one per line.
    expect(prompt).toContain('## Lessons (learned from earlier runs)\n- first lesson\n- second lesson');
    expect(at('## USER.md') < at('## Lessons') && at('## Lessons') < at('## Runtime overrides')).toBe(true);
    expect(prompt).toContain('## Skill: alpha\nfirst skill\nTools: json\n\nALPHA BODY');
    expect(at('BASE') < at('## Skill: alpha') && at('## Skill: alpha') < at('## Skill: beta')).toBe(true);
    expect(at('## Skill: beta') < at('Tool catalog') && at('Tool catalog') < at('## AGENTS.md')).toBe(true);
    expect(
      at('## AGENTS.md') < at('## USER.md') && at('## USER.md') < at('## Runtime overrides\nOVERRIDE'),
    ).toBe(true);
  });
});

describe('bootstrap files', () => {
  it('are read in their fixed order, missing ones skipped, each capped keeping head and tail', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ws-'));
    mkdirSync(join(dir, 'main'));
    writeFileSync(join(dir, 'main', 'USER.md'), 'user');
    writeFileSync(join(dir, 'main', 'AGENTS.md'), `HEAD${'x'.repeat(500)}TAIL`);
    writeFileSync(join(dir, 'main', 'HEARTBEAT.md'), 'beat');
    const files = await readWorkspace(dir, 'main', BOOTSTRAP_FILES, 100);
    expect(files.map((f) => f.name)).toEqual(['AGENTS.md', 'USER.md', 'HEARTBEAT.md']);
    const agents = files[0]!.content;
    expect(agents.length).toBeLessThanOrEqual(100);
    expect(agents.startsWith('HEAD')).toBe(true);
    expect(agents.endsWith('TAIL')).toBe(true);
    expect(agents).toMatch(/chars omitted/);
  });

  it('leave short texts alone', () => {
    expect(capHeadTail('short', 100)).toBe('short');
  });
});
