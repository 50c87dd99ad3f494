/**
 * The sense loop's side of triggers: an event matched against its tenant's triggers, and the runs
 * they start — at once for each event, after a debounce key's quiet period with its latest event,
 * or per batch flush with the events it took. Every step can run again (a redelivered job, two
 * workers) and make no second run: each run's id derives from the trigger and what it consumed
 * (the event, or the batch flush), and the stores remember what was added and taken.
 *
 * Debounce waits in BullMQ's delayed set through its deduplication: one job per key, replaced by
 * each later event (its delay starting again), and kept for after an active one
 * (`keepLastIfActive`). Batches wait as delayed flush jobs with ids from a per-batch counter.
 * No timer of Tetraloop's own: a worker that stops loses nothing.
 */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { derivedRunId } from '../domain/run-id.js';
import type { StoredEvent } from '../domain/event.js';
import { keepJobs, type JobRetention } from '../queues/retention.js';
import { GraphRejectedError, RequestRefusedError, type RunService } from '../runs/run-service.js';
import type { EventStore, BatchRef } from '../state/event-store.js';
import { keyHash } from '../state/keys.js';
import { WebhookStoreError } from '../state/webhook-store.js';
import { metrics } from '../telemetry/metrics.js';
import { eventView, renderKey, resolveEventRefs } from './event-refs.js';
import { filterMatches } from './filter.js';
import type { TriggerBook } from './trigger-book.js';
import {
  debounceId,
  debounceJobId,
  flushJobId,
  TRIGGER_JOB,
  TRIGGER_JOB_RETRY,
  type TriggerPayload,
} from './trigger-jobs.js';
import { firingMode, type Trigger } from './trigger-model.js';

export interface TriggerFiringDeps {
  readonly triggers: TriggerBook;
  readonly events: EventStore;
  readonly runs: Pick<RunService, 'submit'>;
  readonly senseQueue: Queue;
  readonly retention: JobRetention;
  readonly logger: Logger;
}

export class TriggerFiring {
  constructor(private readonly deps: TriggerFiringDeps) {}

  /** Matches one recorded event against its tenant's triggers. */
  async onEvent(tenant: string, eventId: string): Promise<void> {
    const event = await this.deps.events.read(tenant, eventId);
    // Expired (the job waited longer than the dedupe window) or its tenant was deleted.
    if (!event) return;
    for (const trigger of await this.deps.triggers.listening(tenant, event.name)) {
      if (!filterMatches(trigger.filter, event)) {
        metrics.triggerMatches.inc({ outcome: 'filtered' });
        continue;
      }
      switch (firingMode(trigger)) {
        case 'each':
          metrics.triggerMatches.inc({ outcome: 'fired' });
          await this.start(tenant, trigger, [event], `each:${event.id}`);
          break;
        case 'debounce':
          await this.debounce(tenant, trigger, event);
          break;
        case 'batch':
          await this.batch(tenant, trigger, event);
          break;
      }
    }
  }

  private async debounce(tenant: string, trigger: Trigger, event: StoredEvent): Promise<void> {
    const { ms, key } = trigger.debounce!;
    const ref: BatchRef = { triggerId: trigger.id, keyHash: keyHash(renderKey(key, event)) };
    metrics.triggerMatches.inc({ outcome: 'debounced' });
    // An earlier event handled after a later one (another worker) changes nothing.
    if (!(await this.deps.events.noteDebounce(tenant, ref, event, ms))) return;
    await this.deps.senseQueue.add(
      TRIGGER_JOB.debounce,
      { tenant, ...ref } satisfies TriggerPayload<typeof TRIGGER_JOB.debounce>,
      {
        jobId: debounceJobId(tenant, ref.triggerId, ref.keyHash, event.seq),
        delay: ms,
        // Replaces the key's waiting job (the quiet period starts again); while one runs, the
        // latest is kept and added when it ends.
        deduplication: {
          id: debounceId(tenant, ref.triggerId, ref.keyHash),
          replace: true,
          keepLastIfActive: true,
        },
        ...TRIGGER_JOB_RETRY,
        ...keepJobs(this.deps.retention),
      },
    );
  }

  private async batch(tenant: string, trigger: Trigger, event: StoredEvent): Promise<void> {
    const { key, maxSize, maxWaitMs } = trigger.batch!;
    const ref: BatchRef = { triggerId: trigger.id, keyHash: keyHash(renderKey(key, event)) };
    const decision = await this.deps.events.addToBatch(tenant, ref, event, maxSize, maxWaitMs);
    if (decision.dropped) {
      metrics.triggerMatches.inc({ outcome: 'dropped' });
      this.deps.logger.warn(
        { tenant, triggerId: trigger.id, eventId: event.id },
        'a trigger batch is full (TETRALOOP_TRIGGER_BATCH_PENDING_MAX): event dropped for this trigger',
      );
      return;
    }
    metrics.triggerMatches.inc({ outcome: 'batched' });
    for (const flush of decision.flushes) {
      await this.deps.senseQueue.add(
        TRIGGER_JOB.flush,
        { tenant, ...ref, n: flush.n } satisfies TriggerPayload<typeof TRIGGER_JOB.flush>,
        {
          jobId: flushJobId(tenant, ref.triggerId, ref.keyHash, flush.n),
          ...(flush.at === 'timer' ? { delay: maxWaitMs } : {}),
          ...TRIGGER_JOB_RETRY,
          ...keepJobs(this.deps.retention),
        },
      );
    }
  }

  /** A debounce key's quiet period is over: its latest event starts the run, once. */
  async fireDebounce(tenant: string, ref: BatchRef): Promise<void> {
    const trigger = await this.deps.triggers.get(tenant, ref.triggerId);
    const event = await this.deps.events.latestDebounce(tenant, ref);
    if (!trigger?.debounce || !event) return;
    await this.start(tenant, trigger, [event], `debounce:${event.id}`);
    await this.deps.events.finishDebounce(tenant, ref, event.seq);
  }

  /** Flush `n` of a batch: the events it takes start one run. */
  async flushBatch(tenant: string, ref: BatchRef, n: number): Promise<void> {
    const trigger = await this.deps.triggers.get(tenant, ref.triggerId);
    // A deleted trigger's pending events expire with their batch.
    if (!trigger?.batch) return;
    const events = await this.deps.events.takeBatch(tenant, ref, n, trigger.batch.maxSize);
    if (events.length === 0) return;
    await this.start(tenant, trigger, events, `batch:${ref.keyHash}:${n}`);
    await this.deps.events.finishBatch(tenant, ref, n);
  }

  /**
   * Starts a trigger's run with the events it consumed (oldest first). The run's id derives from
   * the trigger and `firing`, so a firing done again finds the run made the first time. A request
   * that no longer passes its checks (an agent removed, an input that does not fit) starts nothing
   * and is logged, without the event's payload.
   */
  private async start(
    tenant: string,
    trigger: Trigger,
    events: readonly StoredEvent[],
    firing: string,
  ): Promise<void> {
    const mode = firingMode(trigger);
    const views = events.map(eventView);
    const scope = { event: views.at(-1)!, events: views };
    const request = { ...trigger.request, input: resolveEventRefs(trigger.request.input, scope) };
    try {
      const result = await this.deps.runs.submit(request, undefined, {
        tenant,
        runId: derivedRunId('trigger', tenant, trigger.id, firing),
        origin: { triggerId: trigger.id, eventIds: events.map((e) => e.id) },
      });
      metrics.triggerRuns.inc({ mode, outcome: result.created ? 'started' : 'repeated' });
    } catch (err) {
      if (
        !(err instanceof GraphRejectedError) &&
        !(err instanceof RequestRefusedError) &&
        !(err instanceof WebhookStoreError)
      )
        throw err;
      metrics.triggerRuns.inc({ mode, outcome: 'rejected' });
      this.deps.logger.warn(
        { tenant, triggerId: trigger.id, eventIds: events.map((e) => e.id), error: err.message },
        "a trigger's run was refused: nothing started",
      );
    }
  }
}
