/** The tenant a request acts for: the one place the API decides it. */
import type { Request } from 'express';
import { DEFAULT_TENANT, type TenantId } from '@tetraloop/core';

/** Until API keys carry a tenant, every request acts for the default tenant. */
export const tenantOf = (_req: Request): TenantId => DEFAULT_TENANT;
