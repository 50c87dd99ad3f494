/**
 * The one place a system prompt is assembled, always in this order:
 * base → skills → tool catalog → bootstrap files → lessons → runtime overrides. Pure.
 */
import type { ToolCatalog } from '../tools/tool-catalog.js';
import type { Skill } from '../workspace/skills.js';
import type { WorkspaceFile } from '../workspace/workspace.js';

export interface SystemPromptParts {
  readonly base: string;
  /** The agent's skills (`skills/*.md` in its workspace), in file-name order. */
  readonly skills?: readonly Skill[];
  readonly catalog?: ToolCatalog;
  readonly bootstrap: readonly WorkspaceFile[];
  /** What the reflect loop learned and put in effect, most confident first. */
  readonly lessons?: readonly string[];
  readonly overrides?: string;
}

export function assembleSystemPrompt(parts: SystemPromptParts): string {
  const sections = [parts.base];
  for (const skill of parts.skills ?? []) {
    const needs = skill.tools.length ? `\nTools: ${skill.tools.join(', ')}` : '';
    sections.push(`## Skill: ${skill.name}\n${skill.description}${needs}\n\n${skill.body}`);
  }
  if (parts.catalog && parts.catalog.tools.length > 0) {
    sections.push(
      `Tool catalog (JSON schema of each tool's args):\n${JSON.stringify(
        parts.catalog.tools.map((t) => ({ name: t.name, description: t.description, args: t.parameters })),
      )}`,
    );
  }
  for (const f of parts.bootstrap) sections.push(`## ${f.name}\n${f.content}`);
  if (parts.lessons && parts.lessons.length > 0) {
    sections.push(`## Lessons (learned from earlier runs)\n${parts.lessons.map((l) => `- ${l}`).join('\n')}`);
  }
  if (parts.overrides) sections.push(`## Runtime overrides\n${parts.overrides}`);
  return sections.join('\n\n');
}
