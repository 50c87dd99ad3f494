/**
 * Outbound webhooks on the queue: the delivery job (in the `sense` queue, the loop of I/O with the
 * outside) and the outbox that turns a run's event into one delivery job per target — the run's own
 * `webhook` and each of its tenant's subscriptions that wants the event. Each job's id is its
 * delivery's id, derived from run, target, event type and key, so announcing an event again (a
 * retried finalize, a re-entered wait) adds nothing while the first job is kept.
 */
import type { Queue } from 'bullmq';
import { z } from 'zod';
import { unscopeName } from '../domain/tenant.js';
import { WebhookEvent, type WebhookEventType, type WebhookSubscription } from '../domain/webhook.js';
import type { RunReadModel, WebhookSubject } from '../state/runs/run-read-model.js';
import type { WebhookStore } from '../state/webhook-store.js';
import {
  deliveryIdOf,
  runFinishedData,
  type DeliveryTarget,
  type WebhookDeliverySettings,
} from '../webhooks/delivery-rules.js';
import { keepJobs, type JobRetention } from './retention.js';

/** The delivery job's name in the `sense` queue. */
export const WEBHOOK_JOB = 'webhook-delivery';

/** The BullMQ backoff type of delivery jobs; its delay is computed by the delivery (`RetryDeliveryError`). */
export const WEBHOOK_BACKOFF_TYPE = 'tetraloop-webhook';

/**
 * One delivery: the event as it is posted and whom it goes to. The URL and the secret are read
 * when it is attempted (a deleted subscription gets nothing more), so no secret is in a job.
 */
export const WebhookJobData = z.object({
  tenant: z.string(),
  runId: z.string(),
  target: z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('subscription'), id: z.string() }),
    z.object({ kind: z.literal('run') }),
  ]),
  event: WebhookEvent,
});
export type WebhookJobData = z.infer<typeof WebhookJobData>;

/**
 * A delivery job waits behind every job of the `sense` queue without a priority (messages, events,
 * lane moves): BullMQ takes jobs without a priority first, so a backlog of deliveries never holds a
 * session's message back.
 */
const DELIVERY_PRIORITY = 10;

/** Thrown by a delivery attempt to be retried after `delayMs` (BullMQ's backoff reads it). */
export class RetryDeliveryError extends Error {
  constructor(
    readonly delayMs: number,
    reason: string,
  ) {
    super(reason);
    this.name = 'RetryDeliveryError';
  }
}

/** What a run's event is, before it is addressed: its type, its key within the run, its data. */
export interface RunEventNotice {
  readonly type: WebhookEventType;
  /** Tells apart events of one type in one run (a node and generation, a wait's signal). */
  readonly key: string;
  readonly data: Record<string, unknown>;
}

export interface WebhookOutboxDeps {
  /** The `sense` queue. */
  readonly queue: Queue;
  readonly runs: Pick<RunReadModel, 'webhookSubject'>;
  readonly webhooks: WebhookStore;
  readonly retention: JobRetention;
  readonly delivery: WebhookDeliverySettings;
}

/** The fields every event of a run carries. */
const runFields = (run: WebhookSubject): Record<string, unknown> => ({
  runId: run.runId,
  agentId: run.agentId,
  sessionKey: run.sessionKey === null ? null : unscopeName(run.sessionKey).name,
});

/** What a caller may already know of a run it announces (see `WebhookOutbox.runFinished`). */
export interface KnownRun {
  readonly tenant: string;
  /** Whether the run has a `webhook` of its own. */
  readonly hasWebhook: boolean;
}

export class WebhookOutbox {
  constructor(private readonly deps: WebhookOutboxDeps) {}

  /**
   * Announces a settled run (`run.finished`); nothing for a run that has not settled. Called by
   * every step that settles a run, and again by every pass that finds it settled, so a crash
   * between settling and this call loses nothing. `known`: the run's tenant and whether it has a
   * webhook of its own, when the caller read them already. A run without one is heard of only by
   * its tenant's subscriptions: when none wants the event, the run itself is not read (a tenant
   * without webhooks pays one read per run, not five).
   */
  async runFinished(runId: string, known?: KnownRun): Promise<number> {
    let subscribers: WebhookSubscription[] | undefined;
    if (known && !known.hasWebhook) {
      subscribers = await this.deps.webhooks.subscribersOf(known.tenant, 'run.finished');
      if (subscribers.length === 0) return 0;
    }
    const run = await this.deps.runs.webhookSubject(runId);
    if (!run?.finishedAt) return 0;
    const data = runFinishedData({
      runId: run.runId,
      agentId: run.agentId,
      sessionKey: run.sessionKey === null ? null : unscopeName(run.sessionKey).name,
      status: run.status,
      error: run.error,
      usage: run.usage,
      createdAt: run.createdAt,
      finishedAt: run.finishedAt,
      output: run.output,
    });
    return this.announce(run, { type: 'run.finished', key: run.finishedAt, data }, subscribers);
  }

  /** Announces a node's event (`run.waiting`, `node.failed`) of a run that is still going. */
  async nodeEvent(runId: string, notice: RunEventNotice): Promise<number> {
    const run = await this.deps.runs.webhookSubject(runId);
    if (!run) return 0;
    return this.announce(run, { ...notice, data: { ...runFields(run), ...notice.data } });
  }

  /**
   * One delivery job per target that wants the event. Returns how many targets want it.
   * `subscribers`: the run's tenant's subscriptions that want it, when the caller read them.
   */
  private async announce(
    run: WebhookSubject,
    notice: RunEventNotice,
    subscribers?: readonly WebhookSubscription[],
  ): Promise<number> {
    const targets: DeliveryTarget[] = [];
    if (run.webhook?.events.includes(notice.type)) targets.push({ kind: 'run' });
    for (const s of subscribers ?? (await this.deps.webhooks.subscribersOf(run.tenant, notice.type)))
      targets.push({ kind: 'subscription', id: s.id });
    if (targets.length === 0) return 0;
    const createdAt = new Date().toISOString();
    await this.deps.queue.addBulk(
      targets.map((target) => {
        const id = deliveryIdOf(run.runId, target, notice.type, notice.key);
        return {
          name: WEBHOOK_JOB,
          data: {
            tenant: run.tenant,
            runId: run.runId,
            target,
            event: { id, type: notice.type, createdAt, data: notice.data },
          } satisfies WebhookJobData,
          opts: {
            jobId: id,
            attempts: this.deps.delivery.attempts,
            backoff: { type: WEBHOOK_BACKOFF_TYPE },
            priority: DELIVERY_PRIORITY,
            ...keepJobs(this.deps.retention),
          },
        };
      }),
    );
    return targets.length;
  }
}
