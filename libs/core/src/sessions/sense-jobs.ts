/** The sense queue's (L1) job catalog: each job name and the zod schema of its payload. */
import { z } from 'zod';
import { TenantId, unscopeName } from '../domain/tenant.js';
import { WEBHOOK_JOB, WebhookJobData } from '../queues/webhook-jobs.js';
import { LANE_MODES } from '../state/session-store.js';
import { AgentId } from '../ceilings/ceilings.js';
import { Thinking } from '../model/thinking.js';
import { SecretGrant } from '../runs/run-request.js';
import { SCHEDULE_FIRE_JOB, ScheduleFireData } from '../schedules/schedule-model.js';
import { TRIGGER_JOB, TRIGGER_PAYLOADS } from '../triggers/trigger-jobs.js';

export const SENSE_JOB = {
  /** A message to a session: dedupe, command or lane admission. */
  message: 'message',
  /** An event from a source (webhook or poll): normalise, dedupe, burst-merge, environment. */
  event: 'event',
  /** A burst window closed: merge its events into one. */
  burstFlush: 'burst-flush',
  /** Move a session's lane on (collected messages whose debounce passed). */
  laneAdvance: 'lane-advance',
  /** Periodic: move lanes a dead process left behind. */
  laneSweep: 'lane-sweep',
  /** Periodic per configured source: poll it (HTTP), tick (timer) or list its directory (file). */
  poll: 'poll',
  /** One attempt of an outbound webhook delivery (see `queues/webhook-jobs.ts`). */
  webhookDelivery: WEBHOOK_JOB,
  /** A schedule's firing, made by its BullMQ job scheduler (see `schedules/schedule-service.ts`). */
  scheduleFire: SCHEDULE_FIRE_JOB,
  /** An event sent to trigger runs: match it against its tenant's triggers (see `triggers/`). */
  triggerEvent: TRIGGER_JOB.event,
  /** A trigger's debounce key went quiet: start its run with the latest event. */
  triggerDebounce: TRIGGER_JOB.debounce,
  /** A trigger's batch is full or waited long enough: start its run with what the flush takes. */
  triggerFlush: TRIGGER_JOB.flush,
} as const;

/**
 * A session key as a client, a source or a source's event names it: the one alphabet of session
 * keys, checked on every path that names a session (API routes, webhook, polled, WebSocket, timer
 * and file source events, session messages). It is part of the session's Redis keys and has no
 * `~`, so a name can never reach another tenant's session (see `scopedName`); stored as
 * `<tenant>~<key>` outside the default tenant.
 */
export const SessionKey = z.string().regex(/^[A-Za-z0-9:_.@-]{1,128}$/, 'must match [A-Za-z0-9:_.@-]{1,128}');
/** A session key as the sense loop and the stores take it: tenant-scoped (see `scopedName`). */
export const ScopedSessionKey = z.string().refine((stored) => {
  const { tenant, name } = unscopeName(stored);
  return TenantId.safeParse(tenant).success && SessionKey.safeParse(name).success;
}, 'must be [<tenant>~]<session key>');

/** An event as it enters: from a webhook body or a poll answer. */
export const InboundEvent = z.object({
  eventId: z.string().min(1).max(256).optional(),
  type: z.string().min(1).max(64).default('event'),
  /** The session of its source's tenant it is for. */
  sessionKey: SessionKey.optional(),
  payload: z.unknown().optional(),
});
export type InboundEvent = z.infer<typeof InboundEvent>;

/** A session message as the session service takes it (the API checks its own limits first). */
export const MessageInput = z.object({
  text: z.string(),
  mode: z.enum(LANE_MODES).optional(),
  eventId: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  /** The agent the session runs: binds a new session; must match a bound one. */
  agentId: AgentId.optional(),
  /** This message's run: the model (instead of the deployment's) and the reasoning effort. */
  model: z.string().min(1).max(200).optional(),
  thinking: Thinking.optional(),
  /** The tenant secrets this message's run grants its planned nodes. */
  secrets: SecretGrant.optional(),
});
export type MessageInput = z.infer<typeof MessageInput>;

/** Payload of each sense job. */
export const SENSE_PAYLOADS = {
  /**
   * `deliveryId`: the API's name for this request, the same for every handling of this job (see
   * `SessionService.handleMessage`); jobs from before it have none.
   */
  [SENSE_JOB.message]: z.object({
    sessionKey: ScopedSessionKey,
    message: MessageInput,
    deliveryId: z.string().min(1).max(64).optional(),
    /**
     * Outside data the message's run is handed as such, never as the message: the event of a source
     * that woke its session, as a delimited untrusted block (see `wake.ts`). Only a source sets it.
     */
    data: z.array(z.string()).max(10).optional(),
  }),
  /** A webhook event; `tenant` is its source's (events from before tenancy have none). */
  [SENSE_JOB.event]: z.object({ source: z.string(), event: InboundEvent, tenant: TenantId.optional() }),
  [SENSE_JOB.burstFlush]: z.object({ key: z.string() }),
  [SENSE_JOB.laneAdvance]: z.object({ sessionKey: ScopedSessionKey, finished: z.string() }),
  [SENSE_JOB.laneSweep]: z.unknown(),
  [SENSE_JOB.poll]: z.object({ source: z.string() }),
  [SENSE_JOB.webhookDelivery]: WebhookJobData,
  [SENSE_JOB.scheduleFire]: ScheduleFireData,
  ...TRIGGER_PAYLOADS,
} as const;
export type SenseJobName = keyof typeof SENSE_PAYLOADS;
export type SensePayload<N extends SenseJobName> = z.input<(typeof SENSE_PAYLOADS)[N]>;
