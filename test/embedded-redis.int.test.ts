/**
 * The embedded Redis of `tetraloop dev` keeps its AOF in a data directory that one process holds
 * at a time: a second one is refused, naming the holder; a lock left by a process that is gone is
 * taken over.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { DataDirLockedError, startRedisServer } from '@tetraloop/core/runtime';

it('lets one Redis at a time use a data directory, and takes over a lock left behind', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tetraloop-data-'));
  const first = await startRedisServer({ dataDir });
  try {
    expect(readFileSync(join(dataDir, 'tetraloop.lock'), 'utf8')).toBe(String(process.pid));
    const second = startRedisServer({ dataDir });
    await expect(second).rejects.toBeInstanceOf(DataDirLockedError);
    await expect(second).rejects.toThrow(`in use by process ${process.pid}`);
  } finally {
    await first.stop();
  }
  // Stopped: the lock is given back.
  expect(() => readFileSync(join(dataDir, 'tetraloop.lock'))).toThrow();

  // A lock whose process is gone (no process has pid 2^22 + 1 here) is stale.
  writeFileSync(join(dataDir, 'tetraloop.lock'), String(4_194_305));
  const again = await startRedisServer({ dataDir });
  try {
    expect(readFileSync(join(dataDir, 'tetraloop.lock'), 'utf8')).toBe(String(process.pid));
  } finally {
    await again.stop();
  }
});
