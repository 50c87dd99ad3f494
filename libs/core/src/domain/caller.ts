/**
 * Who makes a request: an API key of one tenant with its scopes, the operator's root token, or
 * anyone at all when auth is off. Types and pure checks only; keys are verified in `state/`.
 */
import { DEFAULT_TENANT } from './tenant.js';

/** What a key may do. `admin` manages keys (of its own tenant; the root token: of any). */
export const SCOPES = [
  'runs:read',
  'runs:write',
  'sessions:read',
  'sessions:write',
  'signals:write',
  'lessons:write',
  'secrets:write',
  'webhooks:read',
  'webhooks:write',
  'schedules:read',
  'schedules:write',
  'events:write',
  'triggers:read',
  'triggers:write',
  'admin',
] as const;
export type Scope = (typeof SCOPES)[number];

export interface Caller {
  /** The API key's id; null for the root token and with auth off. */
  readonly keyId: string | null;
  /** Everything the caller makes or reads belongs to this tenant. */
  readonly tenant: string;
  readonly scopes: ReadonlySet<Scope>;
  /** The operator's root token (or auth off): may act for any tenant and delete tenants. */
  readonly root: boolean;
}

/** The caller of every request when auth is off: root, in the default tenant. */
export const OPEN_CALLER: Caller = {
  keyId: null,
  tenant: DEFAULT_TENANT,
  scopes: new Set(SCOPES),
  root: true,
};

export const hasScope = (caller: Caller, scope: Scope): boolean => caller.root || caller.scopes.has(scope);
