/**
 * Where events come in (`POST /v1/events`, signed webhook sources with `event` configured): each
 * is recorded once per dedupe window and handed to the sense loop, which matches it against its
 * tenant's triggers. The API does no matching: a crash between two triggers' firings would leave
 * half of them fired, while a sense job that stops is run again by BullMQ and every step of it
 * is idempotent.
 */
import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { EventRequest } from '../domain/event.js';
import type { JobRetention } from '../queues/retention.js';
import { keepJobs } from '../queues/retention.js';
import type { EventStore } from '../state/event-store.js';
import { metrics } from '../telemetry/metrics.js';
import { eventJobId, TRIGGER_JOB, TRIGGER_JOB_RETRY, type TriggerPayload } from './trigger-jobs.js';

export interface EventIntakeDeps {
  readonly events: EventStore;
  readonly senseQueue: Queue;
  readonly retention: JobRetention;
}

export interface EventAccepted {
  readonly id: string;
  readonly name: string;
  /** True when an event of this id was taken within the dedupe window: nothing more happens. */
  readonly duplicate: boolean;
}

export class EventIntake {
  constructor(private readonly deps: EventIntakeDeps) {}

  /** Records an event of `tenant` and hands it on, once per id. */
  async send(
    tenant: string,
    request: EventRequest,
    source?: string,
    now = new Date(),
  ): Promise<EventAccepted> {
    const id = request.id ?? `evt_${randomUUID()}`;
    const { outcome } = await this.deps.events.record(tenant, {
      id,
      name: request.name,
      ...(request.payload !== undefined ? { payload: request.payload } : {}),
      ...(request.key !== undefined ? { key: request.key } : {}),
      receivedAt: now.toISOString(),
      ...(source !== undefined ? { source } : {}),
    });
    // Seen but never handed on: the request that recorded it stopped before the job was added.
    if (outcome !== 'handed') {
      await this.deps.senseQueue.add(
        TRIGGER_JOB.event,
        { tenant, eventId: id } satisfies TriggerPayload<typeof TRIGGER_JOB.event>,
        { jobId: eventJobId(tenant, id), ...TRIGGER_JOB_RETRY, ...keepJobs(this.deps.retention) },
      );
      await this.deps.events.markHanded(tenant, id);
    }
    const duplicate = outcome !== 'new';
    metrics.triggerEvents.inc({ outcome: duplicate ? 'duplicate' : 'accepted' });
    return { id, name: request.name, duplicate };
  }
}
