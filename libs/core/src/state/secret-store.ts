/**
 * Each tenant's secrets in Redis: values encrypted with AES-256-GCM under `TETRALOOP_SECRET_KEY`
 * (see `secrets/secret-cipher.ts`), one hash of values, one of update times and one of scopes (where
 * each may go) per tenant. Values go in through `put` and come out only through `resolve`, in the
 * worker that makes the call, which fills one in only where its scope allows.
 */
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import { SECRET_KEY_FORMAT, decryptSecret, deriveKey, encryptSecret } from '../secrets/secret-cipher.js';
import { SecretName } from '../secrets/secret-ref.js';
import { SecretScope } from '../secrets/secret-scope.js';
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
  /** Only a new scope was written, for a secret that does not exist. */
  'secret_not_found',
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

/**
 * A secret as the list shows it: its name, when it was last written and where it may go, never its
 * value. `hosts` and `tools` are null for a secret stored before secrets had scopes (it goes
 * nowhere until it is written again with them).
 */
export const SecretEntry = z.object({
  name: z.string(),
  updatedAt: z.string(),
  hosts: z.array(z.string()).nullable(),
  tools: z.array(z.string()).nullable(),
});
export type SecretEntry = z.infer<typeof SecretEntry>;

/** What `resolve` answers: the values found, their scopes (null: stored without one), the names missing. */
export interface ResolvedSecrets {
  readonly values: Map<string, string>;
  readonly scopes: Map<string, SecretScope | null>;
  readonly missing: string[];
}

function parseScope(raw: string | null | undefined): SecretScope | null {
  if (raw === null || raw === undefined) return null;
  try {
    const parsed = SecretScope.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

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

  /**
   * Stores (or replaces) `name` with the scope that says where it may go; with `value` undefined,
   * changes only the scope of an existing secret. Throws when the value is too large, the tenant is
   * at its cap, or (scope only) there is no such secret.
   */
  async put(
    tenant: string,
    name: string,
    value: string | undefined,
    scope: SecretScope,
    now = new Date(),
  ): Promise<void> {
    const key = this.key();
    SecretName.parse(name);
    const checked = SecretScope.parse(scope);
    if (value !== undefined) {
      const bytes = Buffer.byteLength(value, 'utf8');
      if (bytes > this.options.maxValueBytes) {
        throw new SecretStoreError(
          'secret_too_large',
          `a secret's value is at most ${this.options.maxValueBytes} bytes (TETRALOOP_SECRET_MAX_BYTES); this one has ${bytes}`,
        );
      }
    }
    const stored = await this.script('put-secret-3', secretKeyList(secretKeys(this.options.prefix, tenant)), [
      name,
      value === undefined ? '' : encryptSecret(key, tenant, name, value),
      now.toISOString(),
      this.options.maxCount,
      JSON.stringify(checked),
    ]);
    if (stored === -1) {
      throw new SecretStoreError('secret_not_found', `no secret "${name}": give its "value" to store it`);
    }
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
    const keys = secretKeys(this.options.prefix, tenant);
    const [updated, scopes] = await Promise.all([
      this.redis.hgetall(keys.updated),
      this.redis.hgetall(keys.scopes),
    ]);
    return Object.entries(updated)
      .map(([name, updatedAt]) => {
        const scope = parseScope(scopes[name]);
        return { name, updatedAt, hosts: scope?.hosts ?? null, tools: scope?.tools ?? null };
      })
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Deletes `name`; false when the tenant had no such secret. */
  async delete(tenant: string, name: string): Promise<boolean> {
    this.key();
    const deleted = await this.script(
      'delete-secret-3',
      secretKeyList(secretKeys(this.options.prefix, tenant)),
      [name],
    );
    return deleted === 1;
  }

  /** The values of `names` (decrypted) with their scopes, and the names the tenant has no secret for. */
  async resolve(tenant: string, names: readonly string[]): Promise<ResolvedSecrets> {
    const key = this.key();
    const unique = [...new Set(names)];
    const values = new Map<string, string>();
    const scopes = new Map<string, SecretScope | null>();
    const missing: string[] = [];
    if (unique.length === 0) return { values, scopes, missing };
    const keys = secretKeys(this.options.prefix, tenant);
    // Both hashes share the tenant's hash tag: one slot, one pipeline.
    const [stored, storedScopes] = await Promise.all([
      this.redis.hmget(keys.values, ...unique),
      this.redis.hmget(keys.scopes, ...unique),
    ]);
    unique.forEach((name, i) => {
      const raw = stored[i];
      if (raw === null || raw === undefined) return missing.push(name);
      scopes.set(name, parseScope(storedScopes[i]));
      try {
        values.set(name, decryptSecret(key, tenant, name, raw));
      } catch {
        throw new SecretStoreError(
          'secret_unreadable',
          `secret "${name}" does not decrypt under the configured TETRALOOP_SECRET_KEY (was the key changed?); write it again`,
        );
      }
    });
    return { values, scopes, missing };
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
