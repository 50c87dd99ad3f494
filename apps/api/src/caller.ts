/**
 * Who is calling: the API key and its tenant. The one place routes read it, so auth can fill it in
 * later; until then every caller is anonymous in the default tenant.
 */
import type { Request } from 'express';
import { DEFAULT_TENANT, type TenantId } from '@tetraloop/core';

export interface Caller {
  /** The API key's id; null without auth. */
  readonly keyId: string | null;
  readonly tenant: TenantId;
}

export function callerOf(_req: Request): Caller {
  return { keyId: null, tenant: DEFAULT_TENANT };
}
