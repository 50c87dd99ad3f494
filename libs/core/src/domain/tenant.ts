/**
 * Tenants: every run, session, source, lesson, memory, blob and secret belongs to one. Redis keys
 * of tenant-named things (sessions, sources, agents' memory, secrets) carry the tenant, so two
 * tenants' `alice` sessions never share a key. With auth off, everything belongs to the default
 * tenant. Types and schemas only.
 */
import { z } from 'zod';

/** A tenant name: lower-case letters, digits and dashes; it is part of Redis key names. */
export const TenantId = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,39}$/, 'a tenant is 1–40 lower-case letters, digits or dashes');
export type TenantId = z.infer<typeof TenantId>;

/** The tenant of everything made without a key (auth off), and of data from before tenancy. */
export const DEFAULT_TENANT = 'default';

/**
 * A tenant-chosen name (a session key, an agent's memory) as stored: `<tenant>~<name>`, or the name
 * itself in the default tenant. `~` is in no tenant-chosen name's alphabet, so two tenants' names
 * can never meet in one key.
 */
export const scopedName = (tenant: string, name: string): string =>
  tenant === DEFAULT_TENANT ? name : `${tenant}~${name}`;

/** The tenant and the name a stored name stands for. */
export function unscopeName(stored: string): { tenant: string; name: string } {
  const at = stored.indexOf('~');
  return at < 0
    ? { tenant: DEFAULT_TENANT, name: stored }
    : { tenant: stored.slice(0, at), name: stored.slice(at + 1) };
}
