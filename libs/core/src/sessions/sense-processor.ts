/**
 * The sense pool's (L1) job processor: messages, source events, bursts, lanes, polls, outbound
 * webhook deliveries, schedule firings, and events matched against triggers with the runs they
 * start.
 */
import type { Job } from 'bullmq';
import { deliverWebhook, type WebhookDeliveryDeps } from '../queues/webhook-delivery.js';
import type { TriggerFiring } from '../triggers/trigger-firing.js';
import { SENSE_JOB, SENSE_PAYLOADS } from './sense-jobs.js';
import type { ScheduleService } from '../schedules/schedule-service.js';
import type { SessionService } from './session-service.js';
import type { PolledSource, SourceService } from './source-service.js';

export interface SenseDeps {
  readonly sessions: SessionService;
  readonly sources: SourceService;
  /** The configured sources (`TETRALOOP_SOURCES`), by name. */
  readonly polled: ReadonlyMap<string, PolledSource>;
  /** What delivers outbound webhooks. */
  readonly webhooks: WebhookDeliveryDeps;
  /** What fires schedules. */
  readonly schedules: Pick<ScheduleService, 'fire'>;
  /** What matches events against triggers and starts their runs. */
  readonly triggers: TriggerFiring;
}

export async function executeSenseJob(deps: SenseDeps, job: Job): Promise<unknown> {
  switch (job.name) {
    case SENSE_JOB.message: {
      const { sessionKey, message, deliveryId, data } = SENSE_PAYLOADS[SENSE_JOB.message].parse(job.data);
      return deps.sessions.handleMessage(sessionKey, message, deliveryId, data);
    }
    case SENSE_JOB.event: {
      const { source, event, tenant } = SENSE_PAYLOADS[SENSE_JOB.event].parse(job.data);
      return deps.sources.ingest(source, event, 'webhook', tenant);
    }
    case SENSE_JOB.burstFlush:
      return deps.sources.flush(SENSE_PAYLOADS[SENSE_JOB.burstFlush].parse(job.data).key);
    case SENSE_JOB.laneAdvance: {
      const { sessionKey, finished } = SENSE_PAYLOADS[SENSE_JOB.laneAdvance].parse(job.data);
      return deps.sessions.advance(sessionKey, finished);
    }
    case SENSE_JOB.laneSweep:
      return deps.sessions.sweep();
    case SENSE_JOB.poll: {
      const source = deps.polled.get(SENSE_PAYLOADS[SENSE_JOB.poll].parse(job.data).source);
      // A scheduler's job id ends with its scheduled time (`repeat:<scheduler>:<ms>`): a timer's
      // tick is named by it, whichever worker runs it.
      const at = Number(/:(\d+)$/.exec(job.id ?? '')?.[1] ?? job.timestamp);
      return source ? deps.sources.poll(source, at) : undefined;
    }
    case SENSE_JOB.webhookDelivery:
      return deliverWebhook(deps.webhooks, job);
    case SENSE_JOB.scheduleFire:
      return deps.schedules.fire(job);
    case SENSE_JOB.triggerEvent: {
      const { tenant, eventId } = SENSE_PAYLOADS[SENSE_JOB.triggerEvent].parse(job.data);
      return deps.triggers.onEvent(tenant, eventId);
    }
    case SENSE_JOB.triggerDebounce: {
      const { tenant, ...ref } = SENSE_PAYLOADS[SENSE_JOB.triggerDebounce].parse(job.data);
      return deps.triggers.fireDebounce(tenant, ref);
    }
    case SENSE_JOB.triggerFlush: {
      const { tenant, n, ...ref } = SENSE_PAYLOADS[SENSE_JOB.triggerFlush].parse(job.data);
      return deps.triggers.flushBatch(tenant, ref, n);
    }
    default:
      throw new Error(`no handler for sense job "${job.name}"`);
  }
}
