/**
 * The sense queue's trigger jobs: their names, payloads and ids. Every id derives from what the
 * job is about, so adding a job again (a retried request, a redelivered job) adds nothing while
 * BullMQ keeps the first. BullMQ forbids `:` in ids: the parts are hashed.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { TenantId } from '../domain/tenant.js';

export const TRIGGER_JOB = {
  /** An event was recorded: match it against its tenant's triggers. */
  event: 'trigger-event',
  /** A debounce key's quiet period passed: start the run with its latest event. */
  debounce: 'trigger-debounce',
  /** A batch is full or its wait is over: start the run with what one flush takes. */
  flush: 'trigger-flush',
} as const;

export const TRIGGER_PAYLOADS = {
  [TRIGGER_JOB.event]: z.object({ tenant: TenantId, eventId: z.string().min(1).max(1024) }),
  [TRIGGER_JOB.debounce]: z.object({ tenant: TenantId, triggerId: z.string(), keyHash: z.string() }),
  [TRIGGER_JOB.flush]: z.object({
    tenant: TenantId,
    triggerId: z.string(),
    keyHash: z.string(),
    n: z.number().int().positive(),
  }),
} as const;
export type TriggerJobName = (typeof TRIGGER_JOB)[keyof typeof TRIGGER_JOB];
export type TriggerPayload<N extends TriggerJobName> = z.input<(typeof TRIGGER_PAYLOADS)[N]>;

const hashOf = (...parts: string[]): string =>
  createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 32);

/** The matching job of one event. */
export const eventJobId = (tenant: string, eventId: string): string => `tev-${hashOf(tenant, eventId)}`;

/** What a debounce key's jobs are deduplicated by: one waiting job per key. */
export const debounceId = (tenant: string, triggerId: string, keyHash: string): string =>
  `tdb-${hashOf(tenant, triggerId, keyHash)}`;

/** The debounce job one event adds (it replaces the key's waiting one). */
export const debounceJobId = (tenant: string, triggerId: string, keyHash: string, seq: number): string =>
  `${debounceId(tenant, triggerId, keyHash)}-${seq}`;

/** Flush `n` of a batch. */
export const flushJobId = (tenant: string, triggerId: string, keyHash: string, n: number): string =>
  `tba-${hashOf(tenant, triggerId, keyHash)}-${n}`;

/** Retries of a trigger job whose Redis call failed: a few, a second apart and growing. */
export const TRIGGER_JOB_RETRY = { attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const;
