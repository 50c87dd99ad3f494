/**
 * The archive as a directory of gzip JSON Lines files (`archive-record.ts` names them). Each record
 * is appended as one gzip member in one `write` to a file opened for appending, so several
 * processes may append to one file; a file of several members is a valid gzip file (`zcat` reads
 * it whole). Beside the files, `index/` holds what finds a record without reading every file: a
 * run's day and tenant, and how far each session's transcript is archived.
 *
 * Run data is in here: the directory is made 0700 and every file 0600.
 *
 * What cannot be read — a line cut by a crash mid-append, an edited file, an index entry that is
 * not one, a file this process may not open — is skipped as if it were not there, and told to
 * `onDamage`: a run whose entry is damaged is not archived as far as a reader can tell.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { pipeline, type Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { promisify } from 'node:util';
import { createGunzip, gzip } from 'node:zlib';
import {
  ARCHIVE_KINDS,
  archiveFileName,
  archivedWithin,
  dayOf,
  daysOf,
  kindOf,
  recordId,
  recordOfLine,
  type ArchiveKind,
  type ArchiveRecord,
  type ArchivedRun,
} from './archive-record.js';

const gzipAsync = promisify(gzip);

/** Whether a record was archived before its tenant was deleted (`deletedAt`, epoch ms). */
const deletedBefore = (record: ArchiveRecord, deletedAt: number | undefined): boolean =>
  deletedAt !== undefined && Date.parse(record.archivedAt) <= deletedAt;

/** Directories of the archive: only its owner may list or enter them. */
const DIR_MODE = 0o700;
/** Files of the archive: only its owner may read them. */
const FILE_MODE = 0o600;

/** A run id as it may name an index file: a UUID (the API accepts no other). */
const RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Where a run's record is: the day of its file, and its tenant (checked before the file is read). */
interface RunPointer {
  readonly day: string;
  readonly tenant: string;
}

/** The day of a pointer: it names a file, so nothing else (no path) is taken from an index entry. */
const DAY = /^\d{4}-\d{2}-\d{2}$/;

const isPointer = (value: unknown): value is RunPointer =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as RunPointer).day === 'string' &&
  DAY.test((value as RunPointer).day) &&
  typeof (value as RunPointer).tenant === 'string';

const UNREADABLE = Symbol('unreadable');

/** Something of the archive that could not be read, and was skipped. */
export interface ArchiveDamage {
  /** The file, inside the archive directory. */
  readonly file: string;
  /** The line of the file's text (from 1) that is no record; absent when the file could not be read on. */
  readonly line?: number;
  readonly reason: string;
}

export interface DirectoryArchiveOptions {
  /** Told of each damaged entry skipped: a warning in the log, a count for an export. */
  readonly onDamage?: (damage: ArchiveDamage) => void;
}

/** What an export reads. */
export interface ArchiveQuery {
  readonly since: Date;
  /** Excluded. */
  readonly until: Date;
  /** @defaultValue both kinds */
  readonly kinds?: readonly ArchiveKind[];
  /** Only this tenant's records. */
  readonly tenant?: string;
}

export class DirectoryArchive {
  private made = false;
  private readonly onDamage: (damage: ArchiveDamage) => void;

  constructor(
    readonly dir: string,
    options: DirectoryArchiveOptions = {},
  ) {
    this.onDamage = options.onDamage ?? (() => undefined);
  }

  /** Appends `record` to its kind's file of its day. */
  async append(record: ArchiveRecord): Promise<void> {
    const file = join(this.dir, archiveFileName(kindOf(record), dayOf(new Date(record.archivedAt))));
    const member = await gzipAsync(`${JSON.stringify(record)}\n`);
    await this.ensureDir(this.dir);
    const handle = await open(file, 'a', FILE_MODE);
    try {
      const { bytesWritten } = await handle.write(member);
      if (bytesWritten !== member.length) throw new Error(`short write to ${file}`);
    } finally {
      await handle.close();
    }
  }

  /** Whether a run is archived (its index entry, written after its record, exists). */
  async hasRun(runId: string): Promise<boolean> {
    return (await this.pointer(runId)) !== null;
  }

  /** Records where a run's record is, once it was appended. */
  async indexRun(record: ArchivedRun): Promise<void> {
    const file = this.pointerFile(record.runId);
    if (!file) return;
    await this.ensureDir(join(file, '..'));
    const pointer: RunPointer = { day: dayOf(new Date(record.archivedAt)), tenant: record.tenant };
    await writeFile(file, JSON.stringify(pointer), { mode: FILE_MODE });
  }

  /**
   * The archived record of a run of `tenant`; null when there is none, it is another tenant's, its
   * tenant was deleted after it was archived, or its index entry or record cannot be read.
   */
  async run(runId: string, tenant: string): Promise<ArchivedRun | null> {
    const pointer = await this.pointer(runId);
    if (!pointer || pointer.tenant !== tenant) return null;
    const deletedAt = await this.tenantDeletedAt(tenant);
    for await (const record of this.read(join(this.dir, archiveFileName('runs', pointer.day)))) {
      if (record.kind === 'run' && record.runId === runId && record.tenant === tenant) {
        return deletedBefore(record, deletedAt) ? null : record;
      }
    }
    return null;
  }

  /**
   * Records that `tenant` was deleted at `at`: its records archived until then are no longer given
   * (not by id, not by export), so a new tenant of the same name never reads the old one's runs.
   * The files keep them until an operator removes those days.
   */
  async forgetTenant(tenant: string, at: Date): Promise<void> {
    const file = this.tenantFile(tenant);
    await this.ensureDir(join(file, '..'));
    await writeFile(file, at.toISOString(), { mode: FILE_MODE });
  }

  /**
   * When `tenant` was last deleted (epoch ms); undefined when never. A mark that cannot be read
   * hides all the tenant's records: a deleted tenant's runs are never given by mistake.
   */
  private async tenantDeletedAt(tenant: string): Promise<number | undefined> {
    const file = this.tenantFile(tenant);
    const text = await this.readIndex(file);
    if (text === null) return undefined;
    const at = text === UNREADABLE ? Number.NaN : Date.parse(text);
    if (Number.isNaN(at)) {
      this.damaged(file, 'a tenant deletion mark that cannot be read: all its records are withheld');
      return Number.POSITIVE_INFINITY;
    }
    return at;
  }

  /**
   * The records archived in [`since`, `until`), day by day, runs before transcripts each day; a
   * record archived twice (a retried write) is given once.
   */
  async *records(query: ArchiveQuery): AsyncGenerator<ArchiveRecord> {
    const kinds = query.kinds ?? ARCHIVE_KINDS;
    const seen = new Set<string>();
    const deletions = new Map<string, number | undefined>();
    const deletedAt = async (tenant: string): Promise<number | undefined> => {
      if (!deletions.has(tenant)) deletions.set(tenant, await this.tenantDeletedAt(tenant));
      return deletions.get(tenant);
    };
    for (const day of daysOf(query.since, query.until)) {
      for (const kind of kinds) {
        for await (const record of this.read(join(this.dir, archiveFileName(kind, day)))) {
          if (!archivedWithin(record, query.since, query.until)) continue;
          if (query.tenant !== undefined && record.tenant !== query.tenant) continue;
          if (deletedBefore(record, await deletedAt(record.tenant))) continue;
          const id = recordId(record);
          if (seen.has(id)) continue;
          seen.add(id);
          yield record;
        }
      }
    }
  }

  /** The first transcript line of `sessionKey` (as stored) not archived yet; 0 for none. */
  async transcriptCursor(sessionKey: string): Promise<number> {
    const text = await readFile(this.cursorFile(sessionKey), 'utf8').catch(missingAs(null));
    const n = text === null ? 0 : Number(text);
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  }

  async setTranscriptCursor(sessionKey: string, next: number): Promise<void> {
    const file = this.cursorFile(sessionKey);
    await this.ensureDir(join(file, '..'));
    await writeFile(file, String(next), { mode: FILE_MODE });
  }

  /**
   * The records of one file, oldest first; none when it does not exist. A line that is no record
   * is skipped; a file that cannot be read on (cut gzip, not gzip) ends where it can no more.
   */
  private async *read(file: string): AsyncGenerator<ArchiveRecord> {
    let handle;
    try {
      handle = await open(file, 'r').catch(missingAs(null));
    } catch (err) {
      this.damaged(file, `cannot be opened: ${(err as Error).message}`);
      return;
    }
    if (!handle) return;
    // Streamed: a day's file may be larger than is wise to hold at once.
    const lines = pipeline(createReadStream('', { fd: handle }), createGunzip(), () => undefined);
    // A character may be cut between two chunks: the decoder holds its first bytes back.
    const text = new StringDecoder('utf8');
    let rest = '';
    let n = 0;
    const recordAt = (line: string): ArchiveRecord | undefined => {
      n += 1;
      if (line === '') return undefined;
      const read = recordOfLine(line);
      if ('record' in read) return read.record;
      this.damaged(file, read.reason, n);
      return undefined;
    };
    try {
      for await (const chunk of lines as Readable) {
        const parts = (rest + text.write(chunk as Buffer)).split('\n');
        rest = parts.pop() ?? '';
        for (const line of parts) {
          const record = recordAt(line);
          if (record) yield record;
        }
      }
    } catch (err) {
      // What follows the damage cannot be told apart from it: the rest of the file is skipped.
      this.damaged(file, `cannot be read on after line ${n}: ${(err as Error).message}`);
      return;
    }
    const record = recordAt(rest + text.end());
    if (record) yield record;
  }

  private async pointer(runId: string): Promise<RunPointer | null> {
    const file = this.pointerFile(runId);
    if (!file) return null;
    const text = await this.readIndex(file);
    if (text === null || text === UNREADABLE) return null;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      value = undefined;
    }
    if (isPointer(value)) return value;
    this.damaged(file, 'a run index entry that is not one: the run is taken as not archived');
    return null;
  }

  /** An index file's text; null when it does not exist; `UNREADABLE` (told) when it cannot be read. */
  private async readIndex(file: string): Promise<string | null | typeof UNREADABLE> {
    try {
      return await readFile(file, 'utf8').catch(missingAs(null));
    } catch (err) {
      this.damaged(file, `cannot be read: ${(err as Error).message}`);
      return UNREADABLE;
    }
  }

  private damaged(path: string, reason: string, line?: number): void {
    const file = relative(this.dir, path);
    this.onDamage(line === undefined ? { file, reason } : { file, line, reason });
  }

  /** A run's index file, sharded by its first two characters; none for an id that is not a UUID. */
  private pointerFile(runId: string): string | null {
    if (!RUN_ID.test(runId)) return null;
    const id = runId.toLowerCase();
    return join(this.dir, 'index', 'runs', id.slice(0, 2), id);
  }

  /** A tenant's deletion mark, named by the hash of its name. */
  private tenantFile(tenant: string): string {
    const hex = createHash('sha256').update(tenant).digest('hex');
    return join(this.dir, 'index', 'tenants', hex);
  }

  /** A session's cursor file, named by the hash of its stored key (any characters, any length). */
  private cursorFile(sessionKey: string): string {
    const hex = createHash('sha256').update(sessionKey).digest('hex');
    return join(this.dir, 'index', 'transcripts', hex.slice(0, 2), hex);
  }

  private async ensureDir(dir: string): Promise<void> {
    if (dir === this.dir && this.made) return;
    await mkdir(dir, { recursive: true, mode: DIR_MODE });
    if (dir === this.dir) this.made = true;
  }
}

/** A catch handler answering `value` for a file that does not exist, rethrowing anything else. */
const missingAs =
  <T>(value: T) =>
  (err: unknown): T => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return value;
    throw err;
  };
