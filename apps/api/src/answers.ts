/**
 * What the API answers beyond the core's own records (the run document, a session's lane, a
 * lesson, a key…): the acknowledgements, lists and envelopes the handlers build, and the error
 * shape. Handlers build their answers `satisfies` these, and the OpenAPI document is generated
 * from them (`openapi.ts`), so an answer cannot drift from its documentation unnoticed.
 */
import {
  DeliveryAttempt,
  RunListing,
  RunStatus,
  SignalDecision,
  WebhookSubscription,
} from '@tetraloop/core/domain';
import { LimitDefinition } from '@tetraloop/core/flow';
import { Lesson, RunSummary } from '@tetraloop/core/memory';
import { MessageResult, SourceStatus } from '@tetraloop/core/sessions';
import { Schedule, ScheduleState } from '@tetraloop/core/schedules';
import { Trigger } from '@tetraloop/core/triggers';
import {
  ApiKeyRecord,
  CounterState,
  ReflectionState,
  SecretEntry,
  SessionListing,
  ServiceStats,
} from '@tetraloop/core/state';
import { z } from 'zod';

/** One problem with a request: where (a dot path; empty for the whole body) and what. */
export const ApiIssue = z.object({ path: z.string(), message: z.string() });
export type ApiIssue = z.infer<typeof ApiIssue>;

/** Every refusal and failure: `{error: {code, message, issues?}}`; `issues` only when there are some. */
export const ApiError = z.object({
  error: z.object({
    /** What went wrong, for programs: recognise errors by it, never by the message. */
    code: z.string(),
    message: z.string(),
    issues: z.array(ApiIssue).min(1).optional(),
  }),
});
export type ApiError = z.infer<typeof ApiError>;

/** `202` of `POST /v1/runs` (also for a repeated `Idempotency-Key`: the first request's run). */
export const RunAccepted = z.object({
  runId: z.uuid(),
  status: RunStatus,
  acceptedAt: z.string(),
});
export type RunAccepted = z.infer<typeof RunAccepted>;

/** A schedule as `GET /v1/schedules/:id` shows it: itself, what its firings did, its next due time. */
export const ScheduleView = Schedule.extend({
  state: ScheduleState,
  /** The next due time; null while paused. */
  nextFireAt: z.string().nullable(),
});
export type ScheduleView = z.infer<typeof ScheduleView>;

export const ScheduleList = z.object({ schedules: z.array(ScheduleView) });
export type ScheduleList = z.infer<typeof ScheduleList>;

/** `202` of `POST /v1/runs/:id/rerun`: the new run, and where it forked from. */
export const RerunAccepted = RunAccepted.extend({
  rerunOf: z.object({ runId: z.uuid(), from: z.string() }),
});
export type RerunAccepted = z.infer<typeof RerunAccepted>;

/** `200` of `GET /v1/runs`: a page of the tenant's runs, newest first. */
export const RunPage = z.object({
  runs: z.array(RunListing),
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: z.string().nullable(),
});
export type RunPage = z.infer<typeof RunPage>;

/** `200` of `GET /v1/sessions`: a page of the tenant's sessions, most recently written first. */
export const SessionPage = z.object({
  sessions: z.array(SessionListing),
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: z.string().nullable(),
});
export type SessionPage = z.infer<typeof SessionPage>;

/** `202` of `POST /v1/runs/:id/cancel`. */
export const RunCancelled = z.object({ runId: z.uuid(), status: RunStatus });
export type RunCancelled = z.infer<typeof RunCancelled>;

/** `202` of `POST /v1/runs/:id/resume`: the run is queued again in a new generation. */
export const RunResumed = z.object({
  runId: z.uuid(),
  status: RunStatus,
  generation: z.number().int().positive(),
});
export type RunResumed = z.infer<typeof RunResumed>;

/** `202` of a signal delivered now, with who decided. */
export const SignalDelivered = z.object({
  runId: z.uuid(),
  signal: z.string(),
  delivered: z.literal(true),
  decidedBy: SignalDecision,
});
export type SignalDelivered = z.infer<typeof SignalDelivered>;

/** `200` of a signal delivered before: the first body is kept. */
export const SignalRepeated = z.object({ runId: z.uuid(), signal: z.string(), delivered: z.literal(false) });
export type SignalRepeated = z.infer<typeof SignalRepeated>;

/** `202` of `POST /v1/runs/:id/feedback`. */
export const FeedbackAccepted = z.object({ runId: z.uuid(), score: z.number() });
export type FeedbackAccepted = z.infer<typeof FeedbackAccepted>;

/** `202` of `POST /v1/agents/:agentId/reflect`: `jobId` is `reflect-<agentId>`. */
export const ReflectAccepted = z.object({ agentId: z.string(), jobId: z.string() });
export type ReflectAccepted = z.infer<typeof ReflectAccepted>;

/** `GET /v1/agents/:agentId/lessons`: most confident first. */
export const AgentLessons = z.object({
  agentId: z.string(),
  version: z.number().int().nonnegative(),
  lessons: z.array(Lesson),
});
export type AgentLessons = z.infer<typeof AgentLessons>;

/** `GET /v1/agents/:agentId/memory`: the hot set, the per-service counters, the reflection state. */
export const AgentMemory = z.object({
  agentId: z.string(),
  runs: z.array(RunSummary),
  services: z.array(ServiceStats),
  reflection: ReflectionState,
});
export type AgentMemory = z.infer<typeof AgentMemory>;

/** `GET /v1/secrets`: names and update times, by name; never a value. */
export const SecretList = z.object({ secrets: z.array(SecretEntry) });
export type SecretList = z.infer<typeof SecretList>;

/** `201` of `POST /v1/keys`: the record and, in this answer only, the key itself. */
export const KeyCreated = ApiKeyRecord.extend({
  /** `tl_<keyId>_<secret>`: shown once, stored only as a hash. */
  key: z.string(),
});
export type KeyCreated = z.infer<typeof KeyCreated>;

/** `GET /v1/keys`: oldest first; never a secret. */
export const KeyList = z.object({ keys: z.array(ApiKeyRecord) });
export type KeyList = z.infer<typeof KeyList>;

/** `DELETE /v1/tenants/:tenant`: what was removed. */
export const TenantDeleted = z.object({
  tenant: z.string(),
  deleted: z.literal(true),
  keys: z.number().int().nonnegative(),
  runs: z.number().int().nonnegative(),
  redisKeys: z.number().int().nonnegative(),
});
export type TenantDeleted = z.infer<typeof TenantDeleted>;

/** `GET`, `PUT` and `DELETE /v1/limits`: the limits in force, where they come from, the counters. */
export const LimitsView = z.object({
  limits: z.array(LimitDefinition),
  /** `configuration` (`TETRALOOP_LIMITS`) or `api` (set with `PUT`, with its version and time). */
  source: z.enum(['configuration', 'api']),
  version: z.number().int().positive().optional(),
  updatedAt: z.string().optional(),
  /** The counters used in the last day, most recent first. */
  counters: z.array(CounterState),
});
export type LimitsView = z.infer<typeof LimitsView>;

/** `GET /v1/sources`: the caller's tenant's sources, sorted by name. */
export const SourceList = z.object({ sources: z.array(SourceStatus) });
export type SourceList = z.infer<typeof SourceList>;

/** `202` of `POST /v1/sources/:name/events` (a duplicate is accepted too, and counted). */
export const SourceEventAccepted = z.object({ source: z.string(), accepted: z.literal(true) });
export type SourceEventAccepted = z.infer<typeof SourceEventAccepted>;

/** `202` of `POST /v1/sessions/:sessionKey/messages`: the lane's decision, as far as it is known. */
export const MessageAnswer = MessageResult.omit({ refused: true });
export type MessageAnswer = z.infer<typeof MessageAnswer>;

/** The first line of a transcript page. */
export const TranscriptHeader = z.object({
  type: z.literal('session'),
  /** The session key, as the client names it. */
  id: z.string(),
  createdAt: z.string().nullable(),
  /** The oldest line number kept (above 0 once the transcript cap dropped older lines). */
  first: z.number().int().nonnegative(),
  /** The number of this page's first line. */
  from: z.number().int().nonnegative(),
  /** The number the next line written will get. */
  length: z.number().int().nonnegative(),
  /** The `after` of the next page; null when this page reaches the end. */
  next: z.number().int().nonnegative().nullable(),
});
export type TranscriptHeader = z.infer<typeof TranscriptHeader>;

/** A transcript line after the header; its other fields by `type` are in docs/sessions.md. */
export const TranscriptEntry = z.looseObject({
  type: z.enum(['message', 'tool_call', 'tool_result', 'run', 'command', 'compaction', 'error', 'refused']),
});
export type TranscriptEntry = z.infer<typeof TranscriptEntry>;

/**
 * Written in an event stream, without an SSE id, when the events after `after` and before `next`
 * are no longer stored (a run's stream keeps about `TETRALOOP_RUN_EVENTS_MAX` events).
 */
export const EventsTruncated = z.object({
  type: z.literal('events.truncated'),
  family: z.literal('lifecycle'),
  phase: z.literal('update'),
  runId: z.string(),
  data: z.object({ after: z.number().int().nonnegative(), next: z.number().int().positive() }),
});
export type EventsTruncated = z.infer<typeof EventsTruncated>;

/** `GET /healthz`. */
export const Liveness = z.object({ status: z.literal('ok') });
export type Liveness = z.infer<typeof Liveness>;

/** `GET /readyz`: `200` when Redis answers a ping, `503` otherwise. */
export const Readiness = z.object({
  status: z.enum(['ready', 'unavailable']),
  redis: z.enum(['up', 'down']),
});
export type Readiness = z.infer<typeof Readiness>;

/** A subscription just made: its signing secret is in this answer only. */
export const WebhookCreated = WebhookSubscription.extend({
  /** Verify deliveries with it (`X-Tetraloop-Signature`); shown once. */
  secret: z.string(),
});
export type WebhookCreated = z.infer<typeof WebhookCreated>;

/** The tenant's subscriptions, oldest first; never a secret. */
export const WebhookList = z.object({ webhooks: z.array(WebhookSubscription) });
export type WebhookList = z.infer<typeof WebhookList>;

/** A subscription's recent delivery attempts, newest first. */
export const WebhookDeliveries = z.object({ id: z.string(), deliveries: z.array(DeliveryAttempt) });
export type WebhookDeliveries = z.infer<typeof WebhookDeliveries>;

/** The tenant's new signing secret of runs' own `webhook`s; shown once. */
export const WebhookSecret = z.object({ secret: z.string() });
export type WebhookSecret = z.infer<typeof WebhookSecret>;

const JsonSchemaDoc = z.record(z.string(), z.unknown()).meta({ description: 'A JSON Schema.' });

/** `GET /v1/tools`: every tool a graph may name. */
export const ToolList = z.object({
  tools: z.array(
    z.object({
      name: z.string(),
      kind: z.enum(['builtin', 'mcp', 'custom']),
      description: z.string(),
      inputSchema: JsonSchemaDoc,
      outputSchema: JsonSchemaDoc.optional(),
      queue: z
        .string()
        .optional()
        .meta({ description: 'A custom tool’s queue (`default`: the shared node queue).' }),
      versions: z
        .array(
          z.object({
            version: z.string(),
            schemaHash: z.string(),
            workers: z.number().int().meta({ description: 'Live worker processes serving this version.' }),
            seenAt: z.string().optional(),
          }),
        )
        .optional(),
      workers: z.number().int().optional().meta({ description: 'Live worker processes serving the tool.' }),
    }),
  ),
});

/** An event taken (`POST /v1/events`): its id (made when the request had none). */
export const EventAccepted = z.object({
  id: z.string(),
  name: z.string(),
  /** True when an event of this id was taken within the dedupe window: it starts nothing more. */
  duplicate: z.boolean(),
});
export type EventAccepted = z.infer<typeof EventAccepted>;

/**
 * A trigger as answered: its run request as made (defaults filled in) is shown as the object it
 * is (the request's schema transforms some fields, which a JSON Schema of answers cannot say).
 */
export const TriggerView = Trigger.extend({ request: z.record(z.string(), z.unknown()) });
export type TriggerView = z.infer<typeof TriggerView>;

/** The tenant's triggers, oldest first. */
export const TriggerList = z.object({ triggers: z.array(TriggerView) });
export type TriggerList = z.infer<typeof TriggerList>;
