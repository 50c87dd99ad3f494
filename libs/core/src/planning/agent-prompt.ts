/**
 * The system prompt of an agent run — a session's run and a one-off loop-mode run alike — made in
 * one place: the agent's skills, its bootstrap files (as `agent:bootstrap` hooks leave them), the
 * lessons in effect for it within its tenant, and the runtime overrides (the caller's, then what
 * `before_prompt_build` hooks add), in `assembleSystemPrompt`'s order.
 */
import type { Logger } from 'pino';
import { scopedName } from '../domain/tenant.js';
import { bootstrapFilesOf, type HookRegistry } from '../hooks/hook-registry.js';
import { UNTRUSTED_DATA_NOTE } from '../model/untrusted-data.js';
import type { LessonBook } from '../reflect/lesson-book.js';
import { metrics } from '../telemetry/metrics.js';
import { loadSkills, type SkillLimits, type SkillsRecord } from '../workspace/skills.js';
import { BOOTSTRAP_FILES, readWorkspace, type WorkspaceFile } from '../workspace/workspace.js';
import { plannerLessons } from './plan-run.js';
import { assembleSystemPrompt } from './system-prompt.js';

/** What every agent run's prompt starts with. */
export const AGENT_BASE = `You are an agent run by Tetraloop. Answer the user's latest message; use tools when they help.
Reply with exactly NO_REPLY when no reply is needed.
${UNTRUSTED_DATA_NOTE}`;

export interface AgentPromptDeps {
  readonly workspaceDir: string;
  readonly workspaceFileChars: number;
  readonly skillLimits: SkillLimits;
  /** The tools each agent may use: a skill needing another is refused. */
  readonly allowedTools: (agentId: string) => ReadonlySet<string>;
  readonly hooks?: HookRegistry;
  readonly lessons?: LessonBook;
  /** Where a refused skill is said. */
  readonly logger?: Pick<Logger, 'warn'>;
}

export interface AgentPromptRequest {
  readonly agentId: string;
  readonly tenant: string;
  readonly runId: string;
  readonly sessionKey?: string;
  /**
   * The bootstrap files to start from (a session's snapshot, taken when its context started);
   * read from the agent's workspace folder when absent.
   */
  readonly files?: readonly WorkspaceFile[];
  /** Runtime overrides, in order (a session's history, hook context, the request's `overrides`). */
  readonly overrides?: readonly string[];
}

export interface AgentPrompt {
  readonly system: string;
  /** What the run records of the skills its prompt holds. */
  readonly skills: SkillsRecord;
}

export async function agentPrompt(deps: AgentPromptDeps, request: AgentPromptRequest): Promise<AgentPrompt> {
  const { agentId, tenant, runId, sessionKey } = request;
  const { hooks } = deps;
  const skills = await loadSkills(deps.workspaceDir, agentId, deps.skillLimits, deps.allowedTools(agentId));
  for (const refusal of skills.record.refused)
    deps.logger?.warn({ agentId, runId, ...refusal }, `skill refused: ${refusal.file}: ${refusal.reason}`);
  let files =
    request.files ??
    (await readWorkspace(deps.workspaceDir, agentId, BOOTSTRAP_FILES, deps.workspaceFileChars));
  // agent:bootstrap may edit this run's files (a session's snapshot stays as read from the workspace).
  if (hooks?.has('agent:bootstrap')) {
    const { ctx } = await hooks.run(
      'agent:bootstrap',
      { agentId, runId, files, ...(sessionKey ? { sessionKey } : {}) },
      (c, r) => {
        const edited = bootstrapFilesOf(r.files, deps.workspaceFileChars);
        return edited ? { ...c, files: edited } : c;
      },
    );
    files = [...ctx.files];
  }
  const overrides = [...(request.overrides ?? []), ...(await promptBuildContext(hooks, agentId, sessionKey))];
  // Lessons are the agent's within its tenant.
  const book = deps.lessons ? await deps.lessons.inEffect(scopedName(tenant, agentId)) : undefined;
  const told = book ? plannerLessons(book.lessons) : [];
  if (told.length > 0) metrics.lessonApplications.inc({ kind: 'soft' }, told.length);
  const system = assembleSystemPrompt({
    base: AGENT_BASE,
    skills: skills.skills,
    bootstrap: files,
    ...(told.length ? { lessons: told.map((l) => l.statement) } : {}),
    ...(overrides.length ? { overrides: overrides.join('\n\n') } : {}),
  });
  return { system, skills: skills.record };
}

/** What `before_prompt_build` hooks add to an agent's prompt (or to a planner's runtime overrides). */
export async function promptBuildContext(
  hooks: HookRegistry | undefined,
  agentId: string,
  sessionKey?: string,
): Promise<string[]> {
  if (!hooks?.has('before_prompt_build')) return [];
  const ctx = { agentId, ...(sessionKey ? { sessionKey } : {}) };
  const { results } = await hooks.run('before_prompt_build', ctx, (c) => c);
  return results.flatMap((r) => (r.context ? [r.context] : []));
}
