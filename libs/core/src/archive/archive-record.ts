/**
 * What the archive holds and where (pure): a settled run (its document with node snapshots, and its
 * events) or a stretch of a session's transcript, one JSON line each, in one gzip file per kind per
 * UTC day of archiving (`runs-2026-12-02.jsonl.gz`, `transcripts-2026-12-02.jsonl.gz`).
 */
import { z } from 'zod';
import type { RunDocument, RunEvent } from '../domain/run-model.js';

/** The archive's files: one kind per file. */
export const ARCHIVE_KINDS = ['runs', 'transcripts'] as const;
export type ArchiveKind = (typeof ARCHIVE_KINDS)[number];

/** A settled run as archived: its document (blobs read in) and its event stream, oldest first. */
export interface ArchivedRun {
  readonly kind: 'run';
  readonly runId: string;
  readonly tenant: string;
  /** When it was written to the archive (ISO 8601, UTC): the day of the file that holds it. */
  readonly archivedAt: string;
  readonly run: RunDocument;
  readonly events: readonly RunEvent[];
}

/** Transcript lines `from`..`to - 1` of a session, archived once the run that added them settled. */
export interface ArchivedTranscript {
  readonly kind: 'transcript';
  readonly tenant: string;
  /** The session as its client names it (without the tenant). */
  readonly sessionKey: string;
  readonly from: number;
  readonly to: number;
  readonly lines: readonly unknown[];
  readonly archivedAt: string;
}

export type ArchiveRecord = ArchivedRun | ArchivedTranscript;

/**
 * The outline of a record as read back: what a reader relies on (its kind, tenant, time, ids), so
 * a line that is JSON but not a record is told apart from one (the run document inside is as
 * archived, not checked again).
 */
const RecordOutline = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('run'),
    runId: z.string(),
    tenant: z.string(),
    archivedAt: z.iso.datetime(),
    run: z.looseObject({}),
    events: z.array(z.unknown()),
  }),
  z.object({
    kind: z.literal('transcript'),
    tenant: z.string(),
    sessionKey: z.string(),
    from: z.number().int(),
    to: z.number().int(),
    lines: z.array(z.unknown()),
    archivedAt: z.iso.datetime(),
  }),
]);

/** One line of an archive file as a record; why not, when it is none (cut, edited, another tool's). */
export function recordOfLine(line: string): { record: ArchiveRecord } | { reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    return { reason: `not JSON: ${(err as Error).message}` };
  }
  const outline = RecordOutline.safeParse(value);
  if (!outline.success) {
    const issue = outline.error.issues[0]!;
    return { reason: `not an archive record: ${issue.path.join('.') || 'line'}: ${issue.message}` };
  }
  return { record: value as ArchiveRecord };
}

/** The file kind a record goes to. */
export const kindOf = (record: ArchiveRecord): ArchiveKind =>
  record.kind === 'run' ? 'runs' : 'transcripts';

/** `YYYY-MM-DD` of an instant, in UTC. */
export const dayOf = (at: Date): string => at.toISOString().slice(0, 10);

/** The file of one kind and day. */
export const archiveFileName = (kind: ArchiveKind, day: string): string => `${kind}-${day}.jsonl.gz`;

/**
 * The identity a reader deduplicates by: a run is archived once, but a write retried after a crash
 * between the append and its index entry appends it again; the first copy read wins.
 */
export const recordId = (record: ArchiveRecord): string =>
  record.kind === 'run'
    ? `run:${record.runId}`
    : `transcript:${record.tenant}:${record.sessionKey}:${record.from}`;

/** The most days one export reads (ten years), so a mistyped range cannot list without end. */
export const MAX_EXPORT_DAYS = 3660;

/** The UTC days from `since`'s to the one before `until` (`until` excluded), oldest first. */
export function daysOf(since: Date, until: Date): string[] {
  const days: string[] = [];
  const start = Date.UTC(since.getUTCFullYear(), since.getUTCMonth(), since.getUTCDate());
  for (let t = start; t < until.getTime() && days.length < MAX_EXPORT_DAYS; t += 86_400_000) {
    days.push(dayOf(new Date(t)));
  }
  return days;
}

/** Whether a record was archived in [`since`, `until`). */
export const archivedWithin = (record: ArchiveRecord, since: Date, until: Date): boolean => {
  const at = Date.parse(record.archivedAt);
  return at >= since.getTime() && at < until.getTime();
};
