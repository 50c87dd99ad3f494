import { mkdtemp, readFile, readdir, rm, stat, writeFile, appendFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunDocument } from '../domain/run-model.js';
import { daysOf, type ArchivedRun } from './archive-record.js';
import { DirectoryArchive, type ArchiveDamage } from './directory-archive.js';

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

describe('a damaged archive', () => {
  const DAY_FILE = 'runs-2026-12-02.jsonl.gz';
  const INDEX = join('index', 'runs', RUN_ID.slice(0, 2), RUN_ID);
  const day = { since: new Date('2026-12-02T00:00:00Z'), until: new Date('2026-12-03T00:00:00Z') };
  let damage: ArchiveDamage[];
  let told: DirectoryArchive;
  const first = runRecord('2026-12-02T10:00:00.000Z');
  const later = runRecord('2026-12-02T11:00:00.000Z', 'acme', '1b9c2f4e-8d1a-4c3b-9e7f-112233445566');

  beforeEach(async () => {
    damage = [];
    told = new DirectoryArchive(archive.dir, { onDamage: (d) => damage.push(d) });
    await told.append(first);
    await told.indexRun(first);
  });

  const found = async (): Promise<unknown[]> => {
    const records: unknown[] = [];
    for await (const r of told.records(day)) records.push(r);
    return records;
  };

  it('takes a run whose index entry is not one as not archived, and tells', async () => {
    await writeFile(join(archive.dir, INDEX), '{"day":"2026-12');
    expect(await told.run(RUN_ID, 'acme')).toBeNull();
    // An entry naming a path instead of a day is no entry either: no file outside is read.
    await writeFile(join(archive.dir, INDEX), JSON.stringify({ day: '../../../etc/passwd', tenant: 'acme' }));
    expect(await told.run(RUN_ID, 'acme')).toBeNull();
    expect(damage).toEqual([
      { file: INDEX, reason: expect.stringContaining('not one') },
      { file: INDEX, reason: expect.stringContaining('not one') },
    ]);
  });

  it('takes an index entry it cannot read as not archived, and tells', async () => {
    await rm(join(archive.dir, INDEX));
    await mkdir(join(archive.dir, INDEX));
    expect(await told.run(RUN_ID, 'acme')).toBeNull();
    expect(damage).toEqual([{ file: INDEX, reason: expect.stringContaining('cannot be read') }]);
  });

  it('skips a line that is no record and reads the ones after it', async () => {
    await appendFile(join(archive.dir, DAY_FILE), gzipSync('{"kind":"run","runId":\n[1,2]\n'));
    await told.append(later);
    expect(await found()).toEqual([first, later]);
    expect(damage).toEqual([
      { file: DAY_FILE, line: 2, reason: expect.stringContaining('not JSON') },
      { file: DAY_FILE, line: 3, reason: expect.stringContaining('not an archive record') },
    ]);
  });

  it('gives what comes before a cut gzip member and tells; a run in it is not archived', async () => {
    const member = gzipSync(`${JSON.stringify(later)}\n`);
    // A crash in the middle of an append.
    await appendFile(join(archive.dir, DAY_FILE), member.subarray(0, member.length >> 1));
    await told.indexRun(later);
    expect(await found()).toEqual([first]);
    expect(await told.run(RUN_ID, 'acme')).toEqual(first);
    expect(await told.run(later.runId, 'acme')).toBeNull();
    expect(damage).toHaveLength(2);
    expect(damage[0]).toEqual({ file: DAY_FILE, reason: expect.stringContaining('cannot be read on') });
  });

  it('withholds a tenant’s records when its deletion mark cannot be read', async () => {
    await told.forgetTenant('acme', new Date('2026-12-01T00:00:00Z'));
    expect(await told.run(RUN_ID, 'acme')).toEqual(first);
    const marks = join(archive.dir, 'index', 'tenants');
    const [mark] = await readdir(marks);
    await writeFile(join(marks, mark!), 'not a time');
    expect(await told.run(RUN_ID, 'acme')).toBeNull();
    expect(await found()).toEqual([]);
    expect(damage[0]).toEqual({ file: join('index', 'tenants', mark!), reason: expect.any(String) });
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
