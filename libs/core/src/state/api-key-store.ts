/**
 * API keys in Redis. A key is `tl_<keyId>_<secret>`: the id (16 hex digits) finds its record, the
 * secret (32 random bytes, base64url) is shown once and stored only as its SHA-256. A key belongs to
 * one tenant and carries scopes; revoking it deletes its record. An expiring key's record expires
 * with it. A key records its maker (`createdBy`, see `domain/key-grant.ts`); a key made by a key
 * gets no tenant, scope or life beyond its maker's, and revoking a key revokes every key it made,
 * and theirs, from a set of its children per key (`apiKeyChildrenKey`). A key made while its maker
 * is being revoked is either in the set the revoke reads or sees its maker gone and undoes itself:
 * the revoke deletes a maker's record before it reads the set, a create adds to the set before it
 * looks at the maker again. With `cacheMs` (the API's `TETRALOOP_KEY_CACHE_MS`) a process reuses a key it verified
 * for that long instead of reading Redis on every request: a key revoked through this process is
 * refused by it at once, by every other process within `cacheMs` (at most 5 s); an expired key is
 * refused at once everywhere. Unknown or wrong keys are never cached.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import { SCOPES, type Scope } from '../domain/caller.js';
import { ROOT_MAKER, keyGrantIssues, type KeyGrantIssue } from '../domain/key-grant.js';
import { apiKeyChildrenKey, apiKeyKey, apiKeyTenantsKey, tenantApiKeysKey } from './keys.js';
import { slotMulti } from './slot-multi.js';

export const ApiKeyRecord = z.object({
  keyId: z.string(),
  tenant: z.string(),
  scopes: z.array(z.enum(SCOPES)),
  name: z.string().optional(),
  createdAt: z.string(),
  expiresAt: z.string().optional(),
  /**
   * The id of the key that made it, or `root` (`ROOT_MAKER`: the root token, or `tetraloop keys` on
   * Redis directly). Absent on a key made before makers were recorded: its maker is unknown, it is
   * listed by no `createdBy`, and only its own revocation or its tenant's deletion ends it.
   */
  createdBy: z.string().optional(),
});
export type ApiKeyRecord = z.infer<typeof ApiKeyRecord>;

/** A key as it is written in a header; anything else is no key at all. */
const KEY_FORMAT = /^tl_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

export class KeyLimitError extends Error {
  constructor(readonly limit: number) {
    super(`a tenant has at most ${limit} keys; revoke one first`);
    this.name = 'KeyLimitError';
  }
}

/** A key asked to make a key beyond itself (`domain/key-grant.ts`): the fields it cannot give. */
export class KeyGrantError extends Error {
  constructor(readonly issues: readonly KeyGrantIssue[]) {
    super(
      `a key makes keys only within its own tenant, scopes and life: ${issues.map((i) => i.path).join(', ')}`,
    );
    this.name = 'KeyGrantError';
  }
}

/** The key meant to make a key is unknown, revoked or expired (or was revoked while it made it). */
export class KeyMakerGoneError extends Error {
  constructor(readonly keyId: string) {
    super(`the key ${keyId} is unknown, revoked or expired`);
    this.name = 'KeyMakerGoneError';
  }
}

export interface ApiKeyStoreOptions {
  readonly prefix: string;
  /** Keys one tenant may hold. @defaultValue 100 */
  readonly maxPerTenant: number;
  /** How long a verified key is reused without reading Redis (0: never). @defaultValue 0 */
  readonly cacheMs?: number;
}

/** Most verified keys one process remembers; past it the cache starts over. */
const KEY_CACHE_MAX = 10_000;

interface VerifiedKey {
  readonly hash: Buffer;
  readonly record: ApiKeyRecord;
  /** Epoch ms after which Redis is read again. */
  readonly until: number;
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

const expired = (record: ApiKeyRecord, now: number): boolean =>
  record.expiresAt !== undefined && Date.parse(record.expiresAt) <= now;

export class ApiKeyStore {
  /** Keys verified in the last `cacheMs`, by key id. */
  private readonly verified = new Map<string, VerifiedKey>();

  constructor(
    private readonly redis: RedisClient,
    private readonly options: ApiKeyStoreOptions,
  ) {}

  /**
   * Makes a key; the answer is the only place its secret ever appears. `createdBy` is the making
   * key's id (its record as Redis holds it now must allow the key: `KeyGrantError`, or
   * `KeyMakerGoneError` when there is none), or `root` (the default): the operator, who may make any.
   */
  async create(input: {
    tenant: string;
    scopes: readonly Scope[];
    name?: string;
    expiresAt?: string;
    createdBy?: string;
  }): Promise<{ record: ApiKeyRecord; key: string }> {
    const { prefix, maxPerTenant } = this.options;
    const createdBy = input.createdBy ?? ROOT_MAKER;
    const maker = createdBy === ROOT_MAKER ? undefined : await this.record(createdBy);
    if (maker === null || (maker && expired(maker, Date.now()))) throw new KeyMakerGoneError(createdBy);
    if (maker) {
      const issues = keyGrantIssues(maker, input);
      if (issues.length > 0) throw new KeyGrantError(issues);
      await this.children(maker.keyId);
    }
    if ((await this.ids(input.tenant)).length >= maxPerTenant) throw new KeyLimitError(maxPerTenant);
    const keyId = randomBytes(8).toString('hex');
    const secret = randomBytes(32).toString('base64url');
    const record: ApiKeyRecord = {
      keyId,
      tenant: input.tenant,
      scopes: [...new Set(input.scopes)],
      ...(input.name ? { name: input.name } : {}),
      createdAt: new Date().toISOString(),
      ...(input.expiresAt ? { expiresAt: input.expiresAt } : {}),
      createdBy,
    };
    const key = apiKeyKey(prefix, keyId);
    const tx = slotMulti(this.redis)
      .hset(key, { hash: sha256(secret).toString('hex'), record: JSON.stringify(record) })
      .sadd(tenantApiKeysKey(prefix, input.tenant), keyId)
      .sadd(apiKeyTenantsKey(prefix), input.tenant);
    if (input.expiresAt) tx.pexpireat(key, Date.parse(input.expiresAt));
    if (maker) {
      const children = apiKeyChildrenKey(prefix, maker.keyId);
      tx.sadd(children, keyId);
      if (maker.expiresAt) tx.pexpireat(children, Date.parse(maker.expiresAt));
    }
    await tx.exec();
    // The maker revoked meanwhile: its revoke may have read its children before this one was added.
    if (maker && (await this.redis.exists(apiKeyKey(prefix, maker.keyId))) === 0) {
      await this.revoke(keyId);
      throw new KeyMakerGoneError(maker.keyId);
    }
    return { record, key: `tl_${keyId}_${secret}` };
  }

  /** The record of a presented key, or null: malformed, unknown, revoked, expired or wrong secret. */
  async verify(presented: string): Promise<ApiKeyRecord | null> {
    const match = KEY_FORMAT.exec(presented);
    if (!match) return null;
    const [, keyId = '', secret = ''] = match;
    const given = sha256(secret);
    const now = Date.now();
    const cached = this.verified.get(keyId);
    if (cached && cached.until > now && timingSafeEqual(cached.hash, given)) {
      return expired(cached.record, now) ? null : cached.record;
    }
    const [hash, json] = await this.redis.hmget(apiKeyKey(this.options.prefix, keyId), 'hash', 'record');
    if (!hash || !json) return null;
    const expected = Buffer.from(hash, 'hex');
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    const record = ApiKeyRecord.parse(JSON.parse(json));
    if (expired(record, now)) return null;
    const cacheMs = this.options.cacheMs ?? 0;
    if (cacheMs > 0) {
      if (this.verified.size >= KEY_CACHE_MAX) this.verified.clear();
      this.verified.set(keyId, { hash: expected, record, until: now + cacheMs });
    }
    return record;
  }

  /** Forgets what this process verified of the key (or of every key of `tenant`). */
  private forget(keyId: string | undefined, tenant?: string): void {
    if (keyId !== undefined) this.verified.delete(keyId);
    if (tenant === undefined) return;
    for (const [id, entry] of this.verified) if (entry.record.tenant === tenant) this.verified.delete(id);
  }

  /**
   * One tenant's keys, or every tenant's (never their secrets); with `createdBy`, only those that
   * key (or `root`) made.
   */
  async list(tenant?: string, createdBy?: string): Promise<ApiKeyRecord[]> {
    const records: ApiKeyRecord[] = [];
    if (createdBy !== undefined && createdBy !== ROOT_MAKER) {
      for (const keyId of await this.children(createdBy)) {
        const record = await this.record(keyId);
        if (record && (tenant === undefined || record.tenant === tenant)) records.push(record);
      }
    } else {
      const tenants = tenant ? [tenant] : await this.redis.smembers(apiKeyTenantsKey(this.options.prefix));
      for (const t of tenants) {
        for (const keyId of await this.ids(t)) {
          const record = await this.record(keyId);
          if (record && (createdBy === undefined || record.createdBy === createdBy)) records.push(record);
        }
      }
    }
    return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /**
   * Revokes a key of `tenant` (any tenant's when absent) and every key it made, theirs too; false
   * when there is no such key.
   */
  async revoke(keyId: string, tenant?: string): Promise<boolean> {
    const record = await this.record(keyId);
    if (!record || (tenant !== undefined && record.tenant !== tenant)) return false;
    const { prefix } = this.options;
    this.forget(keyId);
    const tx = slotMulti(this.redis)
      .del(apiKeyKey(prefix, keyId))
      .srem(tenantApiKeysKey(prefix, record.tenant), keyId);
    if (record.createdBy !== undefined && record.createdBy !== ROOT_MAKER) {
      tx.srem(apiKeyChildrenKey(prefix, record.createdBy), keyId);
    }
    await tx.exec();
    // What it made, a generation at a time: each key's record goes before its children are read.
    const seen = new Set([keyId]);
    let makers = [keyId];
    while (makers.length > 0) {
      const made = (await Promise.all(makers.map((id) => this.redis.smembers(apiKeyChildrenKey(prefix, id)))))
        .flat()
        .filter((id) => !seen.has(id));
      for (const id of made) {
        seen.add(id);
        this.forget(id);
      }
      const drop = slotMulti(this.redis);
      for (const id of made) {
        drop.del(apiKeyKey(prefix, id)).srem(tenantApiKeysKey(prefix, record.tenant), id);
      }
      for (const id of makers) drop.del(apiKeyChildrenKey(prefix, id));
      await drop.exec();
      makers = made;
    }
    return true;
  }

  /** Revokes every key of a tenant. */
  async revokeTenant(tenant: string): Promise<number> {
    const { prefix } = this.options;
    const ids = await this.redis.smembers(tenantApiKeysKey(prefix, tenant));
    this.forget(undefined, tenant);
    const tx = slotMulti(this.redis);
    for (const id of ids) tx.del(apiKeyKey(prefix, id)).del(apiKeyChildrenKey(prefix, id));
    await tx.del(tenantApiKeysKey(prefix, tenant)).srem(apiKeyTenantsKey(prefix), tenant).exec();
    return ids.length;
  }

  private async record(keyId: string): Promise<ApiKeyRecord | null> {
    const json = await this.redis.hget(apiKeyKey(this.options.prefix, keyId), 'record');
    return json ? ApiKeyRecord.parse(JSON.parse(json)) : null;
  }

  /** The ids of the keys a key made, pruned of keys revoked or expired. */
  private async children(keyId: string): Promise<string[]> {
    const { prefix } = this.options;
    const set = apiKeyChildrenKey(prefix, keyId);
    const ids = await this.redis.smembers(set);
    const alive = await Promise.all(ids.map((id) => this.redis.exists(apiKeyKey(prefix, id))));
    const gone = ids.filter((_, i) => alive[i] === 0);
    if (gone.length > 0) await this.redis.srem(set, ...gone);
    return ids.filter((_, i) => alive[i] === 1);
  }

  /** A tenant's key ids, pruned of keys that expired. */
  private async ids(tenant: string): Promise<string[]> {
    const { prefix } = this.options;
    const ids = await this.redis.smembers(tenantApiKeysKey(prefix, tenant));
    const alive = await Promise.all(ids.map((id) => this.redis.exists(apiKeyKey(prefix, id))));
    const gone = ids.filter((_, i) => alive[i] === 0);
    if (gone.length > 0) await this.redis.srem(tenantApiKeysKey(prefix, tenant), ...gone);
    return ids.filter((_, i) => alive[i] === 1);
  }
}
