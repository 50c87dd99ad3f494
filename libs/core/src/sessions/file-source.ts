/**
 * A file source's directory pass: its regular files (hidden ones and symlinks left out) matching
 * its pattern, each with its size and mtime, and the event a new or changed file becomes. The
 * directory is listed and stat'ed on the source's schedule rather than watched (`fs.watch`), which
 * misses changes on network filesystems and mounted volumes and sees only what happens on its own
 * machine; a listing works the same everywhere, and a missed pass is made up by the next.
 */
import { opendir, open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { contentHash } from './session-service.js';

/** A file's content (as UTF-8 text) is in its event up to this size; a bigger one gives its metadata only. */
export const FILE_CONTENT_MAX_BYTES = 64 * 1024;
/** Directory entries one pass looks at; the rest of a bigger directory is not seen. */
export const FILE_SCAN_MAX_ENTRIES = 10_000;

export interface ListedFile {
  name: string;
  path: string;
  size: number;
  mtimeMs: number;
}

/** What a file looked like when taken: a change of either is a new event. */
export const fileSignature = (file: ListedFile): string => `${file.mtimeMs}:${file.size}`;

/** A glob over a file name: `*` any run of characters, `?` one; everything else stands for itself. */
export function globToRegExp(glob: string): RegExp {
  const body = glob
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[\\^$.|+()[\]{}]/g, '\\$&')))
    .join('');
  return new RegExp(`^${body}$`, 's');
}

/**
 * The directory's matching files, from at most `FILE_SCAN_MAX_ENTRIES` entries; `complete` is
 * false when it has more. A file gone between listing and stat is left out.
 */
export async function listFiles(
  dir: string,
  pattern?: string,
): Promise<{ files: ListedFile[]; complete: boolean }> {
  const match = pattern ? globToRegExp(pattern) : undefined;
  const files: ListedFile[] = [];
  let entries = 0;
  // Leaving the loop early closes the directory.
  for await (const entry of await opendir(dir)) {
    if (++entries > FILE_SCAN_MAX_ENTRIES) return { files, complete: false };
    if (!entry.isFile() || entry.name.startsWith('.')) continue;
    if (match && !match.test(entry.name)) continue;
    const path = join(dir, entry.name);
    const info = await stat(path).catch(() => null);
    if (info?.isFile()) files.push({ name: entry.name, path, size: info.size, mtimeMs: info.mtimeMs });
  }
  return { files, complete: true };
}

/** A file's event payload: its metadata, and its text when it is small enough and valid UTF-8. */
export interface FilePayload {
  name: string;
  path: string;
  size: number;
  mtime: string;
  content?: string;
  /** Why `content` is missing: bigger than `FILE_CONTENT_MAX_BYTES`, or not UTF-8 text. */
  contentOmitted?: 'too_large' | 'binary';
}

/**
 * The event of a new or changed file. Its id comes from (path, mtime, size), so the same version of
 * a file is one event whichever worker sees it. At most `FILE_CONTENT_MAX_BYTES` + 1 bytes are read.
 */
export async function fileEvent(file: ListedFile): Promise<{ eventId: string; payload: FilePayload }> {
  const payload: FilePayload = {
    name: file.name,
    path: file.path,
    size: file.size,
    mtime: new Date(file.mtimeMs).toISOString(),
  };
  const eventId = `file:${contentHash([file.path, file.mtimeMs, file.size])}`;
  if (file.size > FILE_CONTENT_MAX_BYTES)
    return { eventId, payload: { ...payload, contentOmitted: 'too_large' } };
  const handle = await open(file.path, 'r');
  try {
    const buffer = Buffer.alloc(FILE_CONTENT_MAX_BYTES + 1);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    // It grew past the cap since it was listed: its next version is taken at the next pass.
    if (bytesRead > FILE_CONTENT_MAX_BYTES)
      return { eventId, payload: { ...payload, contentOmitted: 'too_large' } };
    try {
      const content = new TextDecoder('utf-8', { fatal: true }).decode(buffer.subarray(0, bytesRead));
      return { eventId, payload: { ...payload, content } };
    } catch {
      return { eventId, payload: { ...payload, contentOmitted: 'binary' } };
    }
  } finally {
    await handle.close();
  }
}
