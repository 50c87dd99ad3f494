/**
 * Triggers: which events start which runs (docs/triggers.md). A trigger names an event, may filter
 * it, and holds a whole run request whose input may read the event; it fires for each event, or
 * once per quiet period of a key (`debounce`), or once per batch of events (`batch`). Schemas only.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { EventName } from '../domain/event.js';
import { RunRequest } from '../runs/run-request.js';
import { TriggerFilter } from './filter.js';

/** A trigger's id: `trg_` and 24 hex digits (an `OriginId`, so part of the run search's key names). */
export const TriggerId = z.string().regex(/^trg_[0-9a-f]{24}$/, 'a trigger id is trg_ and 24 hex digits');
export const newTriggerId = (): string => `trg_${randomBytes(12).toString('hex')}`;

/** Longest and shortest wait of a debounce or a batch: a day, and 10 ms. */
export const MAX_TRIGGER_WAIT_MS = 86_400_000;
const WaitMs = z.number().int().min(10).max(MAX_TRIGGER_WAIT_MS);
/** Most events one batch run consumes. */
export const MAX_BATCH_SIZE = 1000;

/** A debounce or batch key: text with `{{event.…}}` references, e.g. `{{event.payload.customer}}`. */
const KeyTemplate = z.string().min(1).max(256);

export const TriggerDebounce = z.strictObject({
  /** Events with the same key share one quiet period. Unset: all of the trigger's events do. */
  key: KeyTemplate.optional(),
  /** The quiet period: the run starts this long after the key's last event, with that event. */
  ms: WaitMs,
});

export const TriggerBatch = z.strictObject({
  /** Events with the same key are batched together. Unset: all of the trigger's events are. */
  key: KeyTemplate.optional(),
  /** A batch's run starts as soon as it holds this many events. */
  maxSize: z.number().int().min(1).max(MAX_BATCH_SIZE),
  /** …or this long after its first event arrived, with what it holds then. */
  maxWaitMs: WaitMs,
});

/** Body of `POST /v1/triggers`. */
export const TriggerRequest = z
  .strictObject({
    /** The event's name it fires on. */
    event: EventName,
    /** Conditions on the event; it fires only when they all hold. */
    filter: TriggerFilter.optional(),
    /** The run each firing starts; its `input` may read `event` (and `events` for a batch). */
    request: RunRequest,
    debounce: TriggerDebounce.optional(),
    batch: TriggerBatch.optional(),
    /** A label for people. */
    description: z.string().max(500).optional(),
  })
  .superRefine((t, ctx) => {
    if (t.debounce && t.batch) {
      ctx.addIssue({ code: 'custom', path: ['batch'], message: 'a trigger debounces or batches, not both' });
    }
  });
export type TriggerRequest = z.infer<typeof TriggerRequest>;

/** A trigger as stored and read back. */
export const Trigger = z.object({
  id: TriggerId,
  event: EventName,
  filter: TriggerFilter.optional(),
  request: RunRequest,
  debounce: TriggerDebounce.optional(),
  batch: TriggerBatch.optional(),
  description: z.string().optional(),
  createdAt: z.string(),
});
export type Trigger = z.infer<typeof Trigger>;

/** How a trigger fires. */
export type FiringMode = 'each' | 'debounce' | 'batch';
export const firingMode = (t: Pick<Trigger, 'debounce' | 'batch'>): FiringMode =>
  t.debounce ? 'debounce' : t.batch ? 'batch' : 'each';
