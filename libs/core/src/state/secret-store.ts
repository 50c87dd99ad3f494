/**
 * Each tenant's secrets in Redis: values encrypted with AES-256-GCM under `TETRALOOP_SECRET_KEY`
 * (see `secrets/secret-cipher.ts`), one hash of values and one of update times per tenant. Values
 * go in through `put` and come out only through `resolve`, in the worker that makes the call.
 */
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import { SECRET_KEY_FORMAT, decryptSecret, deriveKey, encryptSecret } from '../secrets/secret-cipher.js';
import { SecretName } from '../secrets/secret-ref.js';
import { callKeyKey, secretKeyList, secretKeys } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

export interface SecretStoreOptions {
  readonly prefix: string;
  /** The 32-byte key values are encrypted under; without it the store refuses every operation. */
  readonly key?: Buffer;
  /** Largest value, in UTF-8 bytes. @defaultValue 8192 */
  readonly maxValueBytes: number;
  /** Most secrets one tenant may hold. @defaultValue 500 */
  readonly maxCount: number;
}

export const SECRET_ERROR_CODES = [
  /** No `TETRALOOP_SECRET_KEY` is configured. */
  'secrets_off',
  'secret_too_large',
  'too_many_secrets',
  /** A stored value does not decrypt under the configured key (the key changed). */
  'secret_unreadable',
] as const;
export type SecretErrorCode = (typeof SECRET_ERROR_CODES)[number];

export class SecretStoreError extends Error {
  constructor(
    readonly code: SecretErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'SecretStoreError';
  }
}

export const SECRETS_OFF_MESSAGE = `secrets need TETRALOOP_SECRET_KEY (${SECRET_KEY_FORMAT})`;

/** A secret as the list shows it: its name and when it was last written, never its value. */
export const SecretEntry = z.object({ name: z.string(), updatedAt: z.string() });
export type SecretEntry = z.infer<typeof SecretEntry>;

export class SecretStore {
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: SecretStoreOptions,
  ) {
    this.script = loadScripts(redis);
  }

  /** Whether a key is configured: without one, every operation throws `secrets_off`. */
  get configured(): boolean {
    return this.options.key !== undefined;
  }

  private key(): Buffer {
    if (!this.options.key) throw new SecretStoreError('secrets_off', SECRETS_OFF_MESSAGE);
    return this.options.key;
  }

  /** Stores (or replaces) `name`; throws when the value is too large or the tenant is at its cap. */
  async put(tenant: string, name: string, value: string, now = new Date()): Promise<void> {
    const key = this.key();
    SecretName.parse(name);
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > this.options.maxValueBytes) {
      throw new SecretStoreError(
        'secret_too_large',
        `a secret's value is at most ${this.options.maxValueBytes} bytes (TETRALOOP_SECRET_MAX_BYTES); this one has ${bytes}`,
      );
    }
    const stored = await this.script('put-secret-2', secretKeyList(secretKeys(this.options.prefix, tenant)), [
      name,
      encryptSecret(key, tenant, name, value),
      now.toISOString(),
      this.options.maxCount,
    ]);
    if (stored !== 1) {
      throw new SecretStoreError(
        'too_many_secrets',
        `a tenant holds at most ${this.options.maxCount} secrets (TETRALOOP_SECRET_MAX_COUNT); delete one first`,
      );
    }
  }

  /** The tenant's secrets by name, with when each was last written; never a value. */
  async list(tenant: string): Promise<SecretEntry[]> {
    this.key();
    const updated = await this.redis.hgetall(secretKeys(this.options.prefix, tenant).updated);
    return Object.entries(updated)
      .map(([name, updatedAt]) => ({ name, updatedAt }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Deletes `name`; false when the tenant had no such secret. */
  async delete(tenant: string, name: string): Promise<boolean> {
    this.key();
    const deleted = await this.script(
      'delete-secret-2',
      secretKeyList(secretKeys(this.options.prefix, tenant)),
      [name],
    );
    return deleted === 1;
  }

  /** The values of `names` (decrypted), and the names the tenant has no secret for. */
  async resolve(
    tenant: string,
    names: readonly string[],
  ): Promise<{ values: Map<string, string>; missing: string[] }> {
    const key = this.key();
    const unique = [...new Set(names)];
    const values = new Map<string, string>();
    const missing: string[] = [];
    if (unique.length === 0) return { values, missing };
    const stored = await this.redis.hmget(secretKeys(this.options.prefix, tenant).values, ...unique);
    unique.forEach((name, i) => {
      const raw = stored[i];
      if (raw === null || raw === undefined) return missing.push(name);
      try {
        values.set(name, decryptSecret(key, tenant, name, raw));
      } catch {
        throw new SecretStoreError(
          'secret_unreadable',
          `secret "${name}" does not decrypt under the configured TETRALOOP_SECRET_KEY (was the key changed?); write it again`,
        );
      }
    });
    return { values, missing };
  }
}

/**
 * The deployment's key for outbound `Idempotency-Key`s: derived from the secret key when there is
 * one, else a random key written once under the prefix (every worker then reads the same).
 */
export async function loadCallKey(redis: RedisClient, prefix: string, secretKey?: Buffer): Promise<Buffer> {
  if (secretKey) return deriveKey(secretKey, 'idempotency-key');
  const key = callKeyKey(prefix);
  await redis.set(key, randomBytes(32).toString('hex'), 'NX');
  const hex = await redis.get(key);
  if (hex === null) throw new Error(`${key} vanished right after it was written`);
  return Buffer.from(hex, 'hex');
}
