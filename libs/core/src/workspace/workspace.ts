/**
 * An agent's workspace: bootstrap files in a directory of its own, read in a fixed order, each
 * capped (head and tail kept) so one long file cannot crowd out the others. Missing files are
 * skipped.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface WorkspaceFile {
  readonly name: string;
  readonly content: string;
}

/** Files the planner reads, in this order. */
export const PLANNER_FILES = ['AGENTS.md', 'TOOLS.md', 'USER.md', 'MEMORY.md'] as const;

/** Bootstrap files of a session, in this order; snapshotted when the session (context) starts. */
export const BOOTSTRAP_FILES = [
  'AGENTS.md',
  'SOUL.md',
  'TOOLS.md',
  'USER.md',
  'MEMORY.md',
  'HEARTBEAT.md',
] as const;

/** Keeps the head and the tail of `text` within `maxChars`, with a marker where the middle was. */
export function capHeadTail(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const marker = `\n…[${text.length - maxChars} chars omitted]…\n`;
  const keep = Math.max(0, maxChars - marker.length);
  const head = Math.ceil(keep * 0.7);
  return text.slice(0, head) + marker + text.slice(text.length - (keep - head));
}

export async function readWorkspace(
  dir: string,
  agentId: string,
  files: readonly string[],
  maxChars: number,
): Promise<WorkspaceFile[]> {
  const found: WorkspaceFile[] = [];
  for (const name of files) {
    try {
      const content = await readFile(join(dir, agentId, name), 'utf8');
      found.push({ name, content: capHeadTail(content, maxChars) });
    } catch {
      // A missing file is simply not part of the prompt.
    }
  }
  return found;
}

/**
 * The agents with a folder of their own in the workspace `dir` (their ids as folder names);
 * empty when `dir` does not exist.
 */
export async function agentFolders(dir: string): Promise<Set<string>> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return new Set(entries.filter((e) => e.isDirectory()).map((e) => e.name));
  } catch {
    return new Set();
  }
}

/** How long the API reuses a read of the workspace's agent folders (see `cachedAgentFolders`). */
export const AGENT_FOLDERS_CACHE_MS = 1000;

/**
 * `agentFolders(dir)` read at most once per `ttlMs` (a `readdir` per accepted run cost ~8 % of the
 * accept's CPU). `fresh` reads again now: a caller about to refuse an agent asks for it, so a folder
 * made a moment ago is never refused. A folder removed (or the first folder made, which turns
 * unknown agents away) takes effect within `ttlMs`.
 */
export function cachedAgentFolders(
  dir: string,
  ttlMs = AGENT_FOLDERS_CACHE_MS,
  now: () => number = Date.now,
): (fresh?: boolean) => Promise<Set<string>> {
  let cached: { at: number; folders: Promise<Set<string>> } | undefined;
  return (fresh = false) => {
    const at = now();
    if (fresh || !cached || at - cached.at >= ttlMs) cached = { at, folders: agentFolders(dir) };
    return cached.folders;
  };
}
