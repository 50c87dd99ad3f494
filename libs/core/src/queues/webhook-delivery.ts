/**
 * One attempt of one delivery (a `webhook-delivery` job of the `sense` pool): read where it goes
 * and the secret it is signed with, post it through the egress client (the policy that holds the
 * `http` tool: private addresses refused unless allowlisted, checked on the address connected to;
 * no redirects; a byte cap on the answer), record the attempt, and hand a retry back to BullMQ with
 * its delay, so a waiting retry holds no worker slot.
 */
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import type { DeliveryAttempt, DeliveryOutcome } from '../domain/webhook.js';
import type { RunReadModel } from '../state/runs/run-read-model.js';
import type { DeliveryList, WebhookStore } from '../state/webhook-store.js';
import { metrics } from '../telemetry/metrics.js';
import type { EgressClient } from '../tools/egress-client.js';
import { parseRetryAfter } from '../errors/retry-after.js';
import {
  deliveryRequest,
  judgeAttempt,
  transportErrorClass,
  type AttemptReply,
  type WebhookDeliverySettings,
} from '../webhooks/delivery-rules.js';
import { RetryDeliveryError, WebhookJobData } from './webhook-jobs.js';

export interface WebhookDeliveryDeps {
  readonly runs: Pick<RunReadModel, 'webhookSubject'>;
  readonly webhooks: WebhookStore;
  readonly egress: EgressClient;
  readonly settings: WebhookDeliverySettings;
  readonly logger: Logger;
}

/** What became of the attempt; `gone` when its target no longer exists (nothing is recorded). */
export interface DeliveryResult {
  readonly outcome: DeliveryOutcome | 'gone';
}

export async function deliverWebhook(deps: WebhookDeliveryDeps, job: Job): Promise<DeliveryResult> {
  const { tenant, runId, target, event } = WebhookJobData.parse(job.data);
  const list: DeliveryList = target.kind === 'run' ? { runId } : { subscription: target.id };
  // Where it goes and what signs it, read now: a deleted subscription or an expired run gets no
  // more attempts, and a rotated secret signs the attempts after the rotation.
  let destination: { url: string; secret: string | null } | null;
  if (target.kind === 'subscription') {
    destination = await deps.webhooks.forDelivery(tenant, target.id);
  } else {
    const url = (await deps.runs.webhookSubject(runId))?.webhook?.url;
    destination = url === undefined ? null : { url, secret: await deps.webhooks.signingSecret(tenant) };
  }
  if (destination === null) return { outcome: 'gone' };

  const attempt = job.attemptsMade + 1;
  const started = Date.now();
  let reply: AttemptReply;
  if (destination.secret === null) {
    reply = { error: 'no_secret' };
  } else {
    const request = deliveryRequest(event, destination.secret);
    try {
      const res = await deps.egress.fetch(new URL(destination.url), {
        method: 'POST',
        headers: request.headers,
        body: request.body,
        timeoutMs: deps.settings.timeoutMs,
        signal: AbortSignal.timeout(deps.settings.timeoutMs * 2),
      });
      const retryAfter = res.headers['retry-after'];
      reply = {
        status: res.status,
        ...parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter),
      };
    } catch (err) {
      reply = { error: transportErrorClass(err) };
    }
  }
  const verdict = judgeAttempt(reply, attempt, {
    ...deps.settings,
    attempts: job.opts.attempts ?? deps.settings.attempts,
  });
  const record: DeliveryAttempt = {
    deliveryId: event.id,
    type: event.type,
    runId,
    attempt,
    at: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    outcome: verdict.outcome,
    status: verdict.status,
    error: verdict.error,
    ...(verdict.delayMs !== undefined
      ? { retryAt: new Date(Date.now() + verdict.delayMs).toISOString() }
      : {}),
  };
  await deps.webhooks.recordAttempt(tenant, list, record);
  metrics.webhookDeliveries.inc({ outcome: verdict.outcome });
  deps.logger.info(
    {
      runId,
      deliveryId: event.id,
      type: event.type,
      attempt,
      outcome: verdict.outcome,
      status: verdict.status,
    },
    'webhook delivery attempted',
  );
  if (verdict.outcome === 'retrying')
    throw new RetryDeliveryError(verdict.delayMs ?? 0, `${verdict.error ?? 'failed'}: retrying`);
  return { outcome: verdict.outcome };
}
