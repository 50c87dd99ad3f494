/**
 * What a key may give a key it makes: its own tenant, at most its own scopes, and a life that ends
 * no later than its own (a key with an expiry makes only keys with one). A key records its maker,
 * `createdBy`: the maker's key id, or `root` for the operator (the root token, or `tetraloop keys`
 * on Redis directly), which makes keys of any tenant, scopes and life. Pure rules; the store
 * (`state/api-key-store.ts`) applies them to its maker's record as Redis holds it.
 */
import type { Scope } from './caller.js';

/** `createdBy` of a key the operator made: never a key id (those are 16 hex digits). */
export const ROOT_MAKER = 'root';

/** `createdBy` as a query names it: a key id, or `root`. */
export const KEY_MAKER_PATTERN = /^(root|[0-9a-f]{16})$/;

/** What a key holds, or asks to be given. */
export interface KeyGrant {
  readonly tenant: string;
  readonly scopes: readonly Scope[];
  /** ISO time; none: never expires. */
  readonly expiresAt?: string | undefined;
}

/** A field of the key asked for that its maker cannot give, in the API's issue shape. */
export interface KeyGrantIssue {
  readonly path: 'tenant' | 'scopes' | 'expiresAt';
  readonly message: string;
}

/** Every field of `wanted` beyond what `maker` holds; empty when the maker may make it. */
export function keyGrantIssues(maker: KeyGrant, wanted: KeyGrant): KeyGrantIssue[] {
  const issues: KeyGrantIssue[] = [];
  if (wanted.tenant !== maker.tenant) {
    issues.push({ path: 'tenant', message: `must be ${maker.tenant}: a key makes keys of its own tenant` });
  }
  const beyond = wanted.scopes.filter((s) => !maker.scopes.includes(s));
  if (beyond.length > 0) {
    issues.push({ path: 'scopes', message: `the making key lacks ${beyond.join(', ')}` });
  }
  if (maker.expiresAt !== undefined) {
    if (wanted.expiresAt === undefined) {
      issues.push({
        path: 'expiresAt',
        message: `required: the making key expires at ${maker.expiresAt}, and a key it makes no later`,
      });
    } else if (Date.parse(wanted.expiresAt) > Date.parse(maker.expiresAt)) {
      issues.push({
        path: 'expiresAt',
        message: `must be at or before ${maker.expiresAt}, when the making key expires`,
      });
    }
  }
  return issues;
}
