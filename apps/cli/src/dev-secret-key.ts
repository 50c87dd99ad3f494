/**
 * `tetraloop dev`'s own secret key, so secrets, webhook signing secrets and outbound webhooks work on
 * a laptop with nothing configured: made on the first start as `<TETRALOOP_DATA_DIR>/secret-key` (32
 * random bytes in base64, mode 0600) and read back on every later start, so what was stored under it
 * still decrypts. Only `dev` makes one, and only when `TETRALOOP_SECRET_KEY` is unset; `api` and the
 * workers never do.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseSecretKey, SECRET_KEY_FORMAT } from '@tetraloop/core/secrets';

/** The file's name in the data directory. */
export const DEV_SECRET_KEY_FILE = 'secret-key';

/** The data directory holds a `secret-key` that is not a key. */
export class DevSecretKeyError extends Error {
  constructor(readonly file: string) {
    super(
      `${file} does not hold a secret key (${SECRET_KEY_FORMAT}): restore it, or set TETRALOOP_SECRET_KEY; ` +
        'deleting it makes a new key, under which the secrets stored so far no longer decrypt',
    );
    this.name = 'DevSecretKeyError';
  }
}

export interface DevSecretKey {
  /** The key, as `TETRALOOP_SECRET_KEY` takes it. */
  readonly key: string;
  /** Where it is kept. */
  readonly file: string;
  /** True when this start made it. */
  readonly made: boolean;
}

/** The key kept in `dataDir`, made there first when there is none. */
export function devSecretKey(dataDir: string): DevSecretKey {
  const file = join(dataDir, DEV_SECRET_KEY_FILE);
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32).toString('base64');
  // Written whole under another name, then linked into place: a crash leaves no half-written key, and
  // of two starts racing, one key wins and both use it.
  const draft = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(draft, `${key}\n`, { mode: 0o600 });
    chmodSync(draft, 0o600);
    linkSync(draft, file);
    return { key, file, made: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    rmSync(draft, { force: true });
  }
  const kept = readFileSync(file, 'utf8').trim();
  if (!parseSecretKey(kept)) throw new DevSecretKeyError(file);
  return { key: kept, file, made: false };
}
