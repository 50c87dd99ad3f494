/**
 * An agent's skills: `skills/*.md` in its workspace folder, each a Markdown body under YAML front
 * matter naming the skill, saying what it is for and which tools it needs. They are read for each
 * run (the run keeps their hash), in file-name order, bounded in number and size. A skill the agent
 * cannot follow — a tool it needs is outside the agent's allowlist, its front matter is wrong, it is
 * too large or one too many — is refused: left out of the prompt, with a line saying why.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { SkillRefusal, SkillsRecord } from '../domain/run-model.js';

export type { SkillRefusal, SkillsRecord } from '../domain/run-model.js';

/** How many skills an agent may have and how large each may be (`TETRALOOP_SKILLS_MAX`, `TETRALOOP_SKILL_CHARS`). */
export interface SkillLimits {
  readonly maxSkills: number;
  readonly maxChars: number;
}

const SkillFrontMatter = z.strictObject({
  name: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'lowercase letters, digits, "-" and "_", at most 64'),
  description: z.string().trim().min(1).max(1000),
  /** The tools the skill needs; it is refused when the agent may not use one of them. */
  tools: z.array(z.string().min(1).max(128)).max(128).default([]),
});

export interface Skill {
  readonly name: string;
  readonly description: string;
  readonly tools: readonly string[];
  /** The instructions: the file's text after its front matter. */
  readonly body: string;
  /** The file it came from, relative to the agent's folder (`skills/<file>.md`). */
  readonly file: string;
}

export interface SkillSet {
  readonly skills: readonly Skill[];
  readonly record: SkillsRecord;
}

const FRONT_MATTER = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

/**
 * Parses YAML front matter: the `yaml` package's `parse`, loaded by `loadSkills` only when an agent
 * has skill files, so a process whose agents have none never loads it (start time).
 */
export type YamlParse = (text: string) => unknown;

/** One skill file parsed, or why it is refused. Pure. */
export function parseSkill(file: string, text: string, parseYaml: YamlParse): Skill | SkillRefusal {
  const matched = FRONT_MATTER.exec(text);
  if (!matched) return { file, reason: 'no front matter: the file must start with a "---" block' };
  let raw: unknown;
  try {
    raw = parseYaml(matched[1]!);
  } catch (err) {
    return { file, reason: `front matter is not YAML: ${(err as Error).message.split('\n')[0]}` };
  }
  const parsed = SkillFrontMatter.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || 'front matter';
    return { file, reason: `front matter field "${field}": ${issue.message}` };
  }
  const body = text.slice(matched[0].length).trim();
  return { ...parsed.data, body, file };
}

const isSkill = (s: Skill | SkillRefusal): s is Skill => 'body' in s;

/**
 * The skills of `files` (name and text, in the order to load them) that the agent may follow: the
 * first `maxSkills` that parse, fit in `maxChars` and need only tools `allowed` holds. Pure.
 */
export function selectSkills(
  agentId: string,
  files: readonly { name: string; text: string }[],
  limits: SkillLimits,
  allowed: ReadonlySet<string>,
  parseYaml: YamlParse,
): SkillSet {
  const skills: Skill[] = [];
  const refused: SkillRefusal[] = [];
  const names = new Set<string>();
  for (const { name, text } of files) {
    const file = `skills/${name}`;
    if (text.length > limits.maxChars) {
      refused.push({ file, reason: `more than ${limits.maxChars} characters (TETRALOOP_SKILL_CHARS)` });
      continue;
    }
    const parsed = parseSkill(file, text, parseYaml);
    if (!isSkill(parsed)) {
      refused.push(parsed);
      continue;
    }
    const missing = parsed.tools.find((t) => !allowed.has(t));
    if (missing !== undefined) {
      refused.push({
        file,
        skill: parsed.name,
        tool: missing,
        reason: `skill "${parsed.name}" needs tool "${missing}", which agent "${agentId}" may not use`,
      });
      continue;
    }
    if (names.has(parsed.name)) {
      refused.push({ file, skill: parsed.name, reason: `another skill is named "${parsed.name}"` });
      continue;
    }
    if (skills.length >= limits.maxSkills) {
      refused.push({
        file,
        skill: parsed.name,
        reason: `more than ${limits.maxSkills} skills (TETRALOOP_SKILLS_MAX)`,
      });
      continue;
    }
    names.add(parsed.name);
    skills.push(parsed);
  }
  return { skills, record: { hash: skillsHash(skills), loaded: skills.map((s) => s.name), refused } };
}

/** The hash a run records of its skills: what of them reached the prompt, in order. Pure. */
export function skillsHash(skills: readonly Skill[]): string {
  const content = JSON.stringify(skills.map((s) => [s.name, s.description, s.tools, s.body]));
  return `sha256:${createHash('sha256').update(content).digest('hex')}`;
}

/**
 * Reads `<dir>/<agentId>/skills/*.md` in file-name order and selects what the agent may follow
 * (`selectSkills`). A missing folder is no skills.
 */
export async function loadSkills(
  dir: string,
  agentId: string,
  limits: SkillLimits,
  allowed: ReadonlySet<string>,
): Promise<SkillSet> {
  const folder = join(dir, agentId, 'skills');
  const { files, refused } = await readSkillFiles(folder, await skillFileNames(folder), limits);
  // yaml is CommonJS: its exports are `default`, in Node and in the bundled `tetraloop` command alike.
  const parseYaml: YamlParse = files.length > 0 ? (await import('yaml')).default.parse : () => ({});
  const set = selectSkills(agentId, files, limits, allowed, parseYaml);
  return refused.length
    ? { ...set, record: { ...set.record, refused: [...set.record.refused, ...refused] } }
    : set;
}

/** The names of the skill files in `folder`, in the order to load them; none when it cannot be read. */
export async function skillFileNames(folder: string): Promise<string[]> {
  try {
    const entries = await readdir(folder, { withFileTypes: true });
    return entries
      .filter((e) => e.isFile() && e.name.endsWith('.md'))
      .map((e) => e.name)
      .sort();
  } catch {
    return [];
  }
}

/**
 * The text of the skill files `names` of `folder`, and those refused unread: past the bound in
 * number (only `maxSkills` more files than the bound are read, so a folder of thousands costs no
 * more than a few reads past it) or in size, or no longer readable (a file removed or replaced
 * since the folder was listed, or one this process may not read) — the others still load.
 */
export async function readSkillFiles(
  folder: string,
  names: readonly string[],
  limits: SkillLimits,
): Promise<{ files: { name: string; text: string }[]; refused: SkillRefusal[] }> {
  const files: { name: string; text: string }[] = [];
  const refused: SkillRefusal[] = [];
  // Reading stops well past the bound: the rest are refused by name alone.
  const readable = limits.maxSkills * 2;
  for (const [i, name] of names.entries()) {
    const file = `skills/${name}`;
    if (i >= readable) {
      refused.push({ file, reason: `more than ${limits.maxSkills} skills (TETRALOOP_SKILLS_MAX)` });
      continue;
    }
    const path = join(folder, name);
    try {
      // A file past the bound in bytes (at most 4 per character) is refused without being read.
      if ((await stat(path)).size > limits.maxChars * 4) {
        refused.push({ file, reason: `more than ${limits.maxChars} characters (TETRALOOP_SKILL_CHARS)` });
        continue;
      }
      files.push({ name, text: await readFile(path, 'utf8') });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      refused.push({ file, reason: `could not be read (${code})` });
    }
  }
  return { files, refused };
}
