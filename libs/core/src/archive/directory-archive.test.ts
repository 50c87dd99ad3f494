import { mkdtemp, readFile, rm, stat, writeFile, appendFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunDocument } from '../domain/run-model.js';
import { daysOf, type ArchivedRun } from './archive-record.js';
import { DirectoryArchive } from './directory-archive.js';

let root: string;
let archive: DirectoryArchive;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'tetraloop-archive-unit-'));
  archive = new DirectoryArchive(join(root, 'archive'));
});
afterEach(() => rm(root, { recursive: true, force: true }));

const RUN_ID = '0b9c2f4e-8d1a-4c3b-9e7f-112233445566';
const runRecord = (archivedAt: string, tenant = 'acme', runId = RUN_ID): ArchivedRun => ({
  kind: 'run',
  runId,
  tenant,
  archivedAt,
  run: { runId, tenant, status: 'succeeded', note: 'é — ✓ 𝄞'.repeat(5000) } as unknown as RunDocument,
  events: [],
});

async function all(query: Parameters<DirectoryArchive['records']>[0]): Promise<unknown[]> {
  const found: unknown[] = [];
  for await (const r of archive.records(query)) found.push(r);
  return found;
}

describe('the directory archive', () => {
  it('appends records as gzip members of the day’s file, read back whole, a duplicate once', async () => {
    const first = runRecord('2026-12-02T10:00:00.000Z');
    await archive.append(first);
    await archive.indexRun(first);
    // A write retried after a crash between the append and the index entry.
    await archive.append(first);
    const other = runRecord('2026-12-02T11:00:00.000Z', 'acme', '1b9c2f4e-8d1a-4c3b-9e7f-112233445566');
    await archive.append(other);
    const text = await readFile(join(archive.dir, 'runs-2026-12-02.jsonl.gz'));
    expect(text.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    const found = await all({
      since: new Date('2026-12-02T00:00:00Z'),
      until: new Date('2026-12-03T00:00:00Z'),
    });
    expect(found).toEqual([first, other]);
    expect(
      await all({ since: new Date('2026-12-02T10:30:00Z'), until: new Date('2026-12-03T00:00:00Z') }),
    ).toEqual([other]);
    expect(
      await all({
        since: new Date('2026-12-01T00:00:00Z'),
        until: new Date('2026-12-04T00:00:00Z'),
        tenant: 'x',
      }),
    ).toEqual([]);
  });

  it('finds a run by id for its own tenant only, and never reads a path from a bad id', async () => {
    const record = runRecord('2026-12-02T10:00:00.000Z');
    await archive.append(record);
    await archive.indexRun(record);
    expect(await archive.hasRun(RUN_ID)).toBe(true);
    expect(await archive.run(RUN_ID, 'acme')).toEqual(record);
    expect(await archive.run(RUN_ID, 'other')).toBeNull();
    expect(await archive.run('../../etc/passwd', 'acme')).toBeNull();
    expect(await archive.run('2b9c2f4e-8d1a-4c3b-9e7f-112233445566', 'acme')).toBeNull();
  });

  it('keeps its directory 0700 and its files 0600', async () => {
    const record = runRecord('2026-12-02T10:00:00.000Z');
    await archive.append(record);
    await archive.indexRun(record);
    await archive.setTranscriptCursor('acme~chat', 12);
    expect((await stat(archive.dir)).mode & 0o777).toBe(0o700);
    expect((await stat(join(archive.dir, 'runs-2026-12-02.jsonl.gz'))).mode & 0o777).toBe(0o600);
    expect(await archive.transcriptCursor('acme~chat')).toBe(12);
    expect(await archive.transcriptCursor('acme~other')).toBe(0);
  });

  it('reads a file another tool appended to as plain gzip members', async () => {
    await archive.append(runRecord('2026-12-02T10:00:00.000Z'));
    const line = {
      kind: 'transcript',
      tenant: 'acme',
      sessionKey: 's',
      from: 0,
      to: 1,
      lines: ['x'],
      archivedAt: '2026-12-02T12:00:00.000Z',
    };
    await writeFile(
      join(archive.dir, 'transcripts-2026-12-02.jsonl.gz'),
      gzipSync(`${JSON.stringify(line)}\n`),
    );
    await appendFile(
      join(archive.dir, 'transcripts-2026-12-02.jsonl.gz'),
      gzipSync(`${JSON.stringify({ ...line, from: 1 })}`),
    );
    const found = await all({
      since: new Date('2026-12-02T00:00:00Z'),
      until: new Date('2026-12-03T00:00:00Z'),
      kinds: ['transcripts'],
    });
    expect(found).toEqual([line, { ...line, from: 1 }]);
  });
});

describe('export days', () => {
  it('are the UTC days the range touches, the until instant excluded', () => {
    expect(daysOf(new Date('2026-12-01T23:00:00Z'), new Date('2026-12-03T00:00:00Z'))).toEqual([
      '2026-12-01',
      '2026-12-02',
    ]);
    expect(daysOf(new Date('2026-12-01T23:00:00Z'), new Date('2026-12-03T00:00:01Z'))).toHaveLength(3);
  });
});
