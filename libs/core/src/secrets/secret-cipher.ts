/**
 * Secret values at rest: AES-256-GCM under the deployment's key (`TETRALOOP_SECRET_KEY`), a fresh
 * 96-bit IV per value, the tenant and name as additional data (a value copied under another name
 * or tenant does not decrypt). Stored as `v1.<base64 iv ‖ tag ‖ ciphertext>`. Pure: no I/O.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** What `TETRALOOP_SECRET_KEY` must be. */
export const SECRET_KEY_FORMAT = '32 bytes, as base64 or as 64 hex digits';

/** The 32-byte key in `text` (64 hex digits, or base64 of 32 bytes), or undefined when it is not one. */
export function parseSecretKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) return undefined;
  const bytes = Buffer.from(trimmed, trimmed.includes('-') || trimmed.includes('_') ? 'base64url' : 'base64');
  return bytes.length === 32 ? bytes : undefined;
}

const aad = (tenant: string, name: string): Buffer => Buffer.from(`${tenant}\u0000${name}`, 'utf8');

export function encryptSecret(key: Buffer, tenant: string, name: string, plaintext: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad(tenant, name));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `${VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
}

/** The plaintext; throws when the value was not encrypted under this key for this tenant and name. */
export function decryptSecret(key: Buffer, tenant: string, name: string, stored: string): string {
  const [version, data] = stored.split('.', 2);
  if (version !== VERSION || data === undefined) throw new Error('unknown secret format');
  const raw = Buffer.from(data, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
  decipher.setAAD(aad(tenant, name));
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
    'utf8',
  );
}

/** A key for another purpose derived from the secret key (HKDF-SHA256), so one key never serves two. */
export const deriveKey = (secretKey: Buffer, purpose: string): Buffer =>
  Buffer.from(hkdfSync('sha256', secretKey, Buffer.alloc(0), `tetraloop ${purpose}`, 32));
