/**
 * Writes settled runs and session transcripts to the archive, off the hot path: called where a run
 * settles (every pass that finds it settled, after its reply and webhooks) and where a session run's
 * reply is written, never per node. Nothing here runs without an archive configured.
 *
 * A run is archived at least once: its index entry is written after its record, and a pass that
 * finds the entry does nothing; a pass cut between the two appends the record again, and readers
 * keep the first copy (`recordId`).
 */
import type { Logger } from 'pino';
import { unscopeName } from '../domain/tenant.js';
import type { RunEvent } from '../domain/run-model.js';
import type { RunStore } from '../state/runs/run-store.js';
import type { SessionStore } from '../state/session-store.js';
import type { ArchivedRun } from './archive-record.js';
import type { DirectoryArchive } from './directory-archive.js';

/** Events read per round trip while a run's stream is copied. */
const EVENTS_PAGE = 1000;
/** Transcript lines read per round trip. */
const LINES_PAGE = 1000;

export interface RunArchiverDeps {
  readonly archive: DirectoryArchive;
  readonly store: Pick<RunStore, 'document' | 'events' | 'blobs'>;
  readonly logger: Logger;
}

export class RunArchiver {
  constructor(private readonly deps: RunArchiverDeps) {}

  /** The archive runs and transcripts are read back from (the API's `GET /v1/runs/:id`). */
  get archive(): DirectoryArchive {
    return this.deps.archive;
  }

  /**
   * Appends a settled run (its document with every blob read in, and all its events) unless it is
   * archived already. The archive serves the record, never the run: a failure is logged.
   */
  async archiveRun(runId: string): Promise<void> {
    try {
      await this.writeRun(runId);
    } catch (err) {
      this.deps.logger.warn({ runId, err }, 'could not archive the run');
    }
  }

  /**
   * Appends the transcript lines of `sessionKey` (as stored) added since the last time, if any. A
   * session made anew under the same key (its lines numbered from 0 again) is archived from 0.
   */
  async archiveTranscript(sessions: Pick<SessionStore, 'transcriptPage'>, sessionKey: string): Promise<void> {
    try {
      await this.writeTranscript(sessions, sessionKey);
    } catch (err) {
      this.deps.logger.warn({ err }, 'could not archive the session transcript');
    }
  }

  private async writeRun(runId: string): Promise<void> {
    const { archive, store } = this.deps;
    if (await archive.hasRun(runId)) return;
    const doc = await store.document(runId);
    if (!doc?.finishedAt) return;
    const run = await store.blobs.expandDocument(doc, { inputs: true });
    const events: RunEvent[] = [];
    for (let after = 0; ;) {
      const page = await store.events(runId, after, EVENTS_PAGE);
      events.push(...page);
      if (page.length < EVENTS_PAGE) break;
      after = page.at(-1)!.seq;
    }
    const record: ArchivedRun = {
      kind: 'run',
      runId,
      tenant: doc.tenant,
      archivedAt: new Date().toISOString(),
      run,
      events,
    };
    await archive.append(record);
    await archive.indexRun(record);
  }

  private async writeTranscript(
    sessions: Pick<SessionStore, 'transcriptPage'>,
    sessionKey: string,
  ): Promise<void> {
    const { archive } = this.deps;
    let from = await archive.transcriptCursor(sessionKey);
    const { tenant, name } = unscopeName(sessionKey);
    for (;;) {
      const page = await sessions.transcriptPage(sessionKey, from, LINES_PAGE);
      // Fewer lines than archived: the session expired and was made anew.
      if (page.length < from) {
        from = 0;
        continue;
      }
      if (page.lines.length === 0) return;
      // Lines the cap dropped before they were archived are gone: the page starts at the oldest kept.
      const start = page.from;
      const to = start + page.lines.length;
      await archive.append({
        kind: 'transcript',
        tenant,
        sessionKey: name,
        from: start,
        to,
        lines: page.lines,
        archivedAt: new Date().toISOString(),
      });
      await archive.setTranscriptCursor(sessionKey, to);
      from = to;
    }
  }
}
