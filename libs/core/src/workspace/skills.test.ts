import { mkdirSync, mkdtempSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  loadSkills,
  parseSkill,
  readSkillFiles,
  selectSkills,
  skillFileNames,
  skillsHash,
} from './skills.js';

const skill = (name: string, tools: string[] = [], body = `How to ${name}.`): string =>
  `---\nname: ${name}\ndescription: The ${name} skill\ntools: [${tools.join(', ')}]\n---\n${body}\n`;
const limits = { maxSkills: 3, maxChars: 2000 };

describe('parseSkill', () => {
  it('reads the front matter and the body after it', () => {
    expect(parseSkill('skills/a.md', skill('search', ['http_fetch']), parse)).toEqual({
      name: 'search',
      description: 'The search skill',
      tools: ['http_fetch'],
      body: 'How to search.',
      file: 'skills/a.md',
    });
  });

  it('names the field that is wrong, and refuses a file without front matter', () => {
    expect(parseSkill('skills/a.md', '# no front matter', parse)).toMatchObject({
      reason: /no front matter/,
    });
    expect(parseSkill('skills/a.md', '---\nname: x\n---\nbody', parse)).toMatchObject({
      reason: /front matter field "description"/,
    });
    expect(
      parseSkill('skills/a.md', '---\nname: x\ndescription: d\ncolour: red\n---\n', parse),
    ).toMatchObject({
      reason: /colour/,
    });
    expect(parseSkill('skills/a.md', '---\nname: [\n---\n', parse)).toMatchObject({ reason: /not YAML/ });
  });
});

describe('selectSkills', () => {
  const files = (...names: string[]) => names.map((n) => ({ name: `${n}.md`, text: skill(n) }));

  it('refuses a skill needing a tool the agent may not use, naming the skill and the tool', () => {
    const set = selectSkills(
      'main',
      [
        { name: 'a.md', text: skill('fetcher', ['http_fetch']) },
        { name: 'b.md', text: skill('jsoner', ['json']) },
      ],
      limits,
      new Set(['json']),
      parse,
    );
    expect(set.record.loaded).toEqual(['jsoner']);
    expect(set.record.refused).toEqual([
      {
        file: 'skills/a.md',
        skill: 'fetcher',
        tool: 'http_fetch',
        reason: 'skill "fetcher" needs tool "http_fetch", which agent "main" may not use',
      },
    ]);
  });

  it('keeps the file order, bounds the number and the size, and refuses a second skill of a name', () => {
    const big = { name: 'big.md', text: skill('big', [], 'x'.repeat(3000)) };
    const set = selectSkills(
      'main',
      [...files('a', 'b'), big, ...files('a', 'c', 'd')],
      limits,
      new Set(),
      parse,
    );
    expect(set.record.loaded).toEqual(['a', 'b', 'c']);
    expect(set.record.refused.map((r) => [r.file, r.reason])).toEqual([
      ['skills/big.md', 'more than 2000 characters (TETRALOOP_SKILL_CHARS)'],
      ['skills/a.md', 'another skill is named "a"'],
      ['skills/d.md', 'more than 3 skills (TETRALOOP_SKILLS_MAX)'],
    ]);
  });

  it('hashes what reaches the prompt: the same skills the same hash, any change another', () => {
    const one = selectSkills('main', files('a', 'b'), limits, new Set(), parse).skills;
    const again = selectSkills('main', files('a', 'b'), limits, new Set(), parse).skills;
    const swapped = selectSkills('main', files('b', 'a'), limits, new Set(), parse).skills;
    expect(skillsHash(one)).toBe(skillsHash(again));
    expect(skillsHash(one)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(skillsHash(swapped)).not.toBe(skillsHash(one));
  });
});

describe('loadSkills', () => {
  it('reads skills/*.md of the agent in file-name order; no folder, no skills', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'skills-'));
    mkdirSync(join(dir, 'main', 'skills'), { recursive: true });
    writeFileSync(join(dir, 'main', 'skills', '2-later.md'), skill('later'));
    writeFileSync(join(dir, 'main', 'skills', '1-first.md'), skill('first'));
    writeFileSync(join(dir, 'main', 'skills', 'notes.txt'), 'not a skill');
    const set = await loadSkills(dir, 'main', limits, new Set());
    expect(set.skills.map((s) => s.name)).toEqual(['first', 'later']);
    expect((await loadSkills(dir, 'other', limits, new Set())).record).toEqual({
      hash: skillsHash([]),
      loaded: [],
      refused: [],
    });
  });

  it('refuses a skill file gone since the folder was listed, and loads the others', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'skills-'));
    const folder = join(dir, 'main', 'skills');
    mkdirSync(folder, { recursive: true });
    for (const name of ['a', 'b', 'c']) writeFileSync(join(folder, `${name}.md`), skill(name));
    const names = await skillFileNames(folder);
    // Between listing and reading: one removed, one replaced by a link to nothing.
    unlinkSync(join(folder, 'a.md'));
    unlinkSync(join(folder, 'b.md'));
    symlinkSync(join(folder, 'gone.md'), join(folder, 'b.md'));
    const read = await readSkillFiles(folder, names, limits);
    expect(read.files.map((f) => f.name)).toEqual(['c.md']);
    expect(read.refused).toEqual([
      { file: 'skills/a.md', reason: 'could not be read (ENOENT)' },
      { file: 'skills/b.md', reason: 'could not be read (ENOENT)' },
    ]);
    // Listed afresh, the link is no skill file; the remaining skill loads.
    const set = await loadSkills(dir, 'main', limits, new Set());
    expect(set.skills.map((s) => s.name)).toEqual(['c']);
    expect(set.record.refused).toEqual([]);
  });
});
