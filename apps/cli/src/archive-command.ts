/**
 * `tetraloop archive export`: prints the records of the archive (`TETRALOOP_ARCHIVE_DIR`, or
 * `--dir`) archived in a time range, as JSON Lines on stdout — settled runs (document, node
 * snapshots, events) and session transcripts. It reads the directory itself, not the API: run it
 * where the archive is. Exit codes: 0 done (entries that cannot be read skipped, their number said
 * on stderr), 1 the archive could not be read, 2 a usage error.
 */
import { parseArgs } from 'node:util';
import { ARCHIVE_KINDS, DirectoryArchive, type ArchiveKind } from '@tetraloop/core/archive';
import { BaseEnv, ConfigError, parseEnv } from '@tetraloop/core/config';
import { parseTimeBound } from '@tetraloop/core/insight';
import { UsageError, parsing } from './cli-args.js';

export const ARCHIVE_USAGE = `usage: tetraloop archive export --since <time> [--until <time>] [--kind ${ARCHIVE_KINDS.join('|')}]
                               [--tenant <tenant>] [--dir <directory>]

  Prints the records archived from --since up to --until (default: now), oldest day first, one
  JSON object a line: {"kind":"run",…} with the run document and its events, or
  {"kind":"transcript",…} with a stretch of a session's transcript. A record archived twice is
  printed once. A time is a date (2026-12-02, midnight UTC), an ISO time (2026-12-02T05:00:00Z) or
  a duration before now (90s, 15m, 1h, 7d). The archive is --dir, else TETRALOOP_ARCHIVE_DIR.`;

export interface ArchiveIo {
  readonly env: Record<string, string | undefined>;
  readonly now: number;
  readonly stdout: (text: string) => Promise<void> | void;
  readonly stderr: (text: string) => void;
}

const processIo = (): ArchiveIo => ({
  env: process.env,
  now: Date.now(),
  // Waits for the pipe to drain: an export may be far larger than what a pipe buffers.
  stdout: (text) =>
    process.stdout.write(text) ? undefined : new Promise((done) => process.stdout.once('drain', done)),
  stderr: (text) => void process.stderr.write(text),
});

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** A time of the command line as epoch ms: a bare date is its midnight UTC. */
function timeOf(flag: string, text: string, now: number): Date {
  const at = DAY.test(text) ? Date.parse(`${text}T00:00:00Z`) : parseTimeBound(text, now);
  if (at === undefined || Number.isNaN(at)) {
    throw new UsageError(
      `archive export: ${flag} must be a date (2026-12-02), an ISO time (2026-12-02T05:00:00Z) or a duration (1h, 7d), got '${text}'`,
    );
  }
  return new Date(at);
}

/** Runs `tetraloop archive <args>`; answers the exit code. */
export async function archiveCommand(args: readonly string[], io: ArchiveIo = processIo()): Promise<number> {
  try {
    return await archive(args, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

async function archive(args: readonly string[], io: ArchiveIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'export') throw new UsageError(ARCHIVE_USAGE);
  const { values, positionals } = parsing('archive export', () =>
    parseArgs({
      args: rest,
      options: {
        since: { type: 'string' },
        until: { type: 'string' },
        kind: { type: 'string' },
        tenant: { type: 'string' },
        dir: { type: 'string' },
      },
      allowPositionals: true,
      strict: true,
    }),
  );
  if (positionals.length > 0)
    throw new UsageError(`archive export takes no arguments, got '${positionals[0]}'`);
  if (values.since === undefined) throw new UsageError(`archive export needs --since\n${ARCHIVE_USAGE}`);
  const since = timeOf('--since', values.since, io.now);
  const until = values.until === undefined ? new Date(io.now) : timeOf('--until', values.until, io.now);
  if (until.getTime() <= since.getTime())
    throw new UsageError('archive export: --until must be after --since');
  const kind = values.kind;
  if (kind !== undefined && !(ARCHIVE_KINDS as readonly string[]).includes(kind)) {
    throw new UsageError(`archive export: --kind must be one of ${ARCHIVE_KINDS.join(', ')}, got '${kind}'`);
  }
  const dir = values.dir ?? archiveDirOf(io.env);
  if (dir === undefined) {
    throw new UsageError('archive export: no archive: set TETRALOOP_ARCHIVE_DIR or pass --dir');
  }
  let skipped = 0;
  const records = new DirectoryArchive(dir, { onDamage: () => (skipped += 1) }).records({
    since,
    until,
    ...(kind !== undefined ? { kinds: [kind as ArchiveKind] } : {}),
    ...(values.tenant !== undefined ? { tenant: values.tenant } : {}),
  });
  try {
    for await (const record of records) await io.stdout(`${JSON.stringify(record)}\n`);
  } catch (err) {
    io.stderr(`archive export: cannot read the archive at ${dir}: ${(err as Error).message}\n`);
    return 1;
  }
  // Damaged lines (a crash mid-append, an edit) are not records: the rest is exported.
  if (skipped > 0)
    io.stderr(
      `archive export: skipped ${skipped} corrupt or unreadable ${skipped === 1 ? 'entry' : 'entries'}\n`,
    );
  return 0;
}

/** `TETRALOOP_ARCHIVE_DIR` as configured (the environment, or the config file applied to it). */
function archiveDirOf(env: Record<string, string | undefined>): string | undefined {
  try {
    return parseEnv(BaseEnv.pick({ TETRALOOP_ARCHIVE_DIR: true }), env).TETRALOOP_ARCHIVE_DIR;
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`archive export: ${err.message}`);
    throw err;
  }
}
