/**
 * Signed webhook sources: each is configured with a secret, a tenant and optionally the sessions
 * it may reach. Their requests are signed as `webhooks/signature.ts` says, the scheme outbound
 * webhooks are signed with too.
 */
import { z } from 'zod';
import { EventName } from '../domain/event.js';
import { DEFAULT_TENANT, TenantId } from '../domain/tenant.js';
import { SessionKey } from './sense-jobs.js';

/** One webhook source as configured (`TETRALOOP_WEBHOOKS`). */
export const WebhookSource = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}'),
  /** The shared secret requests are signed with; at least 16 characters. */
  secret: z.string().min(16, 'use at least 16 characters'),
  /** The tenant the source's events belong to. @defaultValue "default" */
  tenant: TenantId.default(DEFAULT_TENANT),
  /** The only session keys its events may name; any when absent. */
  sessions: z.array(SessionKey).min(1).optional(),
  /**
   * Each event it sends is also an event of this name for its tenant's triggers (docs/triggers.md):
   * its `payload` as the event's, its `eventId` as `<source>/<eventId>`.
   */
  event: EventName.optional(),
});
export type WebhookSource = z.infer<typeof WebhookSource>;

/** The configured webhook sources: names must be unique. */
export const WebhookSources = z
  .array(WebhookSource)
  .refine(
    (list) => new Set(list.map((s) => s.name)).size === list.length,
    'webhook source names must be unique',
  );

/** The API's webhook settings: the configured sources and the signature tolerance. */
export interface WebhookSettings {
  readonly sources: readonly WebhookSource[];
  /** @defaultValue 300 */
  readonly toleranceSeconds: number;
}
