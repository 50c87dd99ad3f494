/**
 * Events that start runs (docs/triggers.md): what a client or a signed webhook sends, and the
 * event as it is stored and handed to triggers. Types and schemas only.
 */
import { z } from 'zod';

/** An event's name, e.g. `order.created`: what a trigger listens for. */
export const EventName = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'an event name is 1–128 letters, digits or _ . : -');

/**
 * An event's id: a client's name for it, taken once within the dedupe window. Never part of a key
 * name as given (keys hold its hash), so any printable text will do.
 */
export const EventId = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, 'an event id is printable ASCII without spaces');

/** Body of `POST /v1/events`. */
export const EventRequest = z.strictObject({
  name: EventName,
  /** What the event says; triggers' filters and run inputs read it as `event.payload.*`. */
  payload: z.unknown().optional(),
  /** The sender's id for the event: one seen within the dedupe window is taken once. Made when absent. */
  id: EventId.optional(),
  /** A key of the sender's (a customer, an order): triggers may debounce or batch by it. */
  key: z.string().min(1).max(256).optional(),
});
export type EventRequest = z.infer<typeof EventRequest>;

/** An event as stored and as triggers see it (`event.*` in filters, keys and run inputs). */
export const StoredEvent = z.object({
  /** A client's `id`, a made one (`evt_…`), or a webhook source's `<source>/<eventId>`. */
  id: z.string().min(1),
  name: EventName,
  payload: z.unknown().optional(),
  key: z.string().optional(),
  receivedAt: z.string(),
  /** Its place among its tenant's events: later events have larger numbers. */
  seq: z.number().int().nonnegative(),
  /** The signed webhook source that sent it, when one did. */
  source: z.string().optional(),
});
export type StoredEvent = z.infer<typeof StoredEvent>;
