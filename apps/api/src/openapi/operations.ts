/**
 * What each route takes and answers, for the OpenAPI document: one entry per route of the route
 * table (the compiler refuses a route without one, the contract test a registered route missing
 * from the document), plus the open routes outside `/v1`. Parameters and bodies are the schemas the
 * handlers validate with (`requests.ts`, the core's), answers the schemas they answer with
 * (`answers.ts`, the core's records); error codes are listed by status.
 */
import { CostDay } from '@tetraloop/core/cost';
import {
  NodeView,
  OriginId,
  RunDocument,
  WebhookId,
  WebhookSubscriptionRequest,
} from '@tetraloop/core/domain';
import { RunExplain } from '@tetraloop/core/insight';
import { Lesson } from '@tetraloop/core/memory';
import { RunRequest } from '@tetraloop/core/runs';
import { SecretName } from '@tetraloop/core/secrets';
import { ScheduleRequest, SchedulePatch } from '@tetraloop/core/schedules';
import { InboundEvent } from '@tetraloop/core/sessions';
import { DailyCost, SessionView } from '@tetraloop/core/state';
import { z } from 'zod';
import {
  AgentLessons,
  AgentMemory,
  FeedbackAccepted,
  KeyCreated,
  KeyList,
  LimitsView,
  MessageAnswer,
  ReflectAccepted,
  RerunAccepted,
  RunAccepted,
  RunPage,
  ScheduleList,
  ScheduleView,
  RunCancelled,
  RunResumed,
  SecretList,
  SessionPage,
  SignalDelivered,
  SignalRepeated,
  SourceEventAccepted,
  SourceList,
  TenantDeleted,
  ToolList,
  TriggerList,
  TriggerView,
  EventAccepted,
  WebhookCreated,
  WebhookDeliveries,
  WebhookList,
  WebhookSecret,
} from '../answers.js';
import { AguiRunInput } from '../agui/agui-input.js';
import {
  A2ARequest,
  AgentId,
  BlobHash,
  EventCursor,
  EventsQuery,
  FeedbackBody,
  IdempotencyKey,
  KeyBody,
  KeyIdParam,
  KeyListQuery,
  LessonId,
  LessonPatch,
  LessonsQuery,
  LimitsBody,
  MemoryQuery,
  MessageBody,
  ReadQuery,
  RerunBody,
  RunIdParam,
  RunSearchQuery,
  SecretBody,
  SessionKey,
  SessionListQuery,
  SignalName,
  SignalPayload,
  SignatureHeader,
  SourceName,
  TenantId,
  TranscriptQuery,
  TriggerBody,
  TriggerIdParam,
  EventBody,
  waitQuery,
} from '../requests.js';
import { McpMessage } from '../mcp/mcp-messages.js';
import type { RouteName } from '../route-table.js';
import { langGraphOperations } from './langgraph-operations.js';

export type { AnswerSpec, OperationSpec, ParameterSpec } from './operation-spec.js';
import type { OperationSpec, ParameterSpec } from './operation-spec.js';

/** What the document needs to know of the deployment. */
export interface OperationSettings {
  /** `TETRALOOP_MAX_WAIT_MS`: the largest `timeoutMs` of `/wait`. */
  readonly maxWaitMs: number;
}

const runId: ParameterSpec = { schema: RunIdParam, description: 'The run id (a UUID).' };
const sessionKey: ParameterSpec = {
  schema: SessionKey,
  description: 'The session key: it names a lane of the caller’s tenant.',
};
const agentId: ParameterSpec = { schema: AgentId, description: 'The agent.' };
const scheduleId: ParameterSpec = { schema: OriginId, description: 'The schedule’s id (`sch_…`).' };
const webhookId: ParameterSpec = { schema: WebhookId, description: 'The subscription’s id (`whk_…`).' };
const triggerId: ParameterSpec = { schema: TriggerIdParam, description: 'The trigger’s id (`trg_…`).' };
const expand = '`blobs`: each blob stub in `output` and `nodes.*.output` replaced by the output itself.';

const A2AVersion = z.string().max(16);

/** Every route of the route table (`/v1`, and LangGraph's under `/langgraph`). */
export function routeOperations(settings: OperationSettings): { readonly [K in RouteName]: OperationSpec } {
  return {
    'runs.submit': {
      tag: 'runs',
      summary: 'Submit a run',
      description:
        'A fixed `graph`, or a `task` planned into one (`mode: "dag"`) or worked on by the tool-calling loop (`mode: "loop"`). A graph is validated in full before anything is stored. A repeated `Idempotency-Key` answers the first request’s run.',
      headers: {
        'Idempotency-Key': {
          schema: IdempotencyKey.unwrap(),
          description:
            'Names the run: every request with the same key (in the same tenant) gets the same run.',
        },
      },
      body: { schema: RunRequest, required: true },
      answers: {
        202: {
          description: 'Accepted (or found, for a repeated Idempotency-Key).',
          json: RunAccepted,
          headers: { Location: 'The run: `/v1/runs/<runId>`.' },
        },
      },
      errors: {
        400: ['invalid_request', 'invalid_graph'],
        409: ['webhook_secret_missing', 'secrets_off'],
        415: ['unsupported_media_type'],
        503: ['not_replicated', 'not_persisted'],
      },
    },
    'runs.list': {
      tag: 'runs',
      summary: 'Search the tenant’s runs',
      description:
        'Newest first, a page at a time, from per-tenant indexes kept by the run scripts (a run leaves them when it expires). Child runs are not listed.',
      query: {
        schema: RunSearchQuery,
        describe: {
          status: 'Only runs in this status.',
          agentId: 'Only runs of this agent.',
          sessionKey: 'Only runs of this session.',
          tag: 'Only runs carrying this tag.',
          scheduleId: 'Only runs a firing of this schedule started.',
          triggerId: 'Only runs this trigger started.',
          since:
            'Created at or after: an ISO time with its zone, or a duration before now (`90s`, `15m`, `1h`, `7d`).',
          until: 'Created at or before: as `since`.',
          limit: 'At most this many runs.',
          cursor: 'The `nextCursor` of the previous page.',
        },
      },
      answers: { 200: { description: 'A page of run summaries.', json: RunPage } },
      errors: { 400: ['invalid_request'] },
    },
    'runs.get': {
      tag: 'runs',
      summary: 'Read a run',
      params: { id: runId },
      query: { schema: ReadQuery, describe: { expand } },
      answers: { 200: { description: 'The run document.', json: RunDocument } },
      errors: { 400: ['invalid_request'], 404: ['run_not_found'] },
    },
    'runs.wait': {
      tag: 'runs',
      summary: 'Wait until a run settles',
      description:
        'Long-polls: `200` with the run document once the run has settled (`finishedAt` set), `202` with the current document when `timeoutMs` passes first. A wait on a run still going holds a slot of the tenant’s and the process’s caps.',
      params: { id: runId },
      query: {
        schema: waitQuery(settings.maxWaitMs),
        describe: {
          timeoutMs: `How long to wait, in ms (at most TETRALOOP_MAX_WAIT_MS, here ${settings.maxWaitMs}).`,
          expand,
          abortOnDisconnect:
            '`true`: the run is cancelled when this request is closed before the run settles (the key needs `runs:write`). Default `false`: a client that goes away only stops waiting.',
        },
      },
      answers: {
        200: { description: 'The run has settled.', json: RunDocument },
        202: { description: 'Still going when `timeoutMs` passed: the current document.', json: RunDocument },
      },
      errors: {
        400: ['invalid_request'],
        403: ['forbidden'],
        404: ['run_not_found'],
        429: ['too_many_waits'],
        503: ['waits_at_capacity'],
      },
    },
    'runs.events': {
      tag: 'runs',
      summary: 'Follow a run’s events (server-sent events)',
      description:
        'Replays the stored events after `Last-Event-ID` (or `?after`), then follows new ones, and closes after the current generation’s `run.finished`. Each event: `id: <seq>`, `event: <family>`, `data: <RunEvent as JSON>` (`#/components/schemas/RunEvent`). Events trimmed from the stream are announced by one `EventsTruncated` event without an id. A `: keep-alive` comment comes after 15 s without events.',
      params: { id: runId },
      query: {
        schema: EventsQuery,
        describe: { after: 'Start after this sequence number, when no `Last-Event-ID` is sent.' },
      },
      headers: {
        'Last-Event-ID': {
          schema: EventCursor,
          description: 'Start after this sequence number: the id of the last event received.',
        },
      },
      answers: { 200: { description: 'The event stream.', media: 'text/event-stream' } },
      errors: { 404: ['run_not_found'], 429: ['too_many_streams'], 503: ['streams_at_capacity'] },
    },
    'runs.explain': {
      tag: 'runs',
      summary: 'Where a run’s time went',
      description:
        'For every node its queue wait (ready → started), execution, retry backoff, throttled and parked time and tokens; the critical path; the achieved parallelism (node time ÷ wall time) and wall time ÷ critical path.',
      params: { id: runId },
      answers: { 200: { description: 'The explanation.', json: RunExplain } },
      errors: { 404: ['run_not_found'] },
    },
    'runs.item': {
      tag: 'runs',
      summary: 'One item of a map node',
      description:
        'The item `index` (from 0) of the map node `nodeId`, as the run document shows a node: its snapshot (attempts, input, output or error) once it settled, its live state while it runs, `pending` before it starts. Kept as long as the run.',
      params: {
        id: runId,
        nodeId: { schema: z.string(), description: 'The map node’s id.' },
        index: { schema: z.string().regex(/^\d+$/), description: 'The item’s index in the list, from 0.' },
      },
      answers: { 200: { description: 'The item.', json: NodeView } },
      errors: { 400: ['invalid_request'], 404: ['run_not_found', 'item_not_found'] },
    },
    'runs.cancel': {
      tag: 'runs',
      summary: 'Cancel a run',
      params: { id: runId },
      answers: { 202: { description: 'Cancelled (also when it already was).', json: RunCancelled } },
      errors: { 404: ['run_not_found'], 409: ['run_finished'] },
    },
    'runs.resume': {
      tag: 'runs',
      summary: 'Resume a failed or timed-out run from its snapshots',
      params: { id: runId },
      answers: {
        202: {
          description: 'Queued again in a new generation.',
          json: RunResumed,
          headers: { Location: 'The run: `/v1/runs/<runId>`.' },
        },
      },
      errors: { 404: ['run_not_found'], 409: ['not_resumable'] },
    },
    'runs.rerun': {
      tag: 'runs',
      summary: 'Rerun a settled run from a node',
      description:
        'A new run (a fork) with the same graph and input that reuses every snapshot of the origin not downstream of `from`, and runs `from` and everything after it again. The new run’s `rerunOf` names its origin. A repeated `Idempotency-Key` answers the first request’s run.',
      params: { id: runId },
      headers: {
        'Idempotency-Key': {
          schema: IdempotencyKey.unwrap(),
          description: 'Names the new run: every rerun request with the same key gets the same run.',
        },
      },
      body: { schema: RerunBody, required: true },
      answers: {
        202: {
          description: 'The new run, accepted.',
          json: RerunAccepted,
          headers: { Location: 'The new run: `/v1/runs/<runId>`.' },
        },
      },
      errors: {
        400: ['invalid_request', 'invalid_graph'],
        404: ['run_not_found'],
        409: ['not_rerunnable'],
        415: ['unsupported_media_type'],
        503: ['not_replicated', 'not_persisted'],
      },
    },
    'runs.signal': {
      tag: 'runs',
      summary: 'Deliver a signal to a run',
      description:
        'The JSON body (any JSON; `null` without a body) becomes the output of the wait nodes waiting for the signal, or answers a tool call held for approval (`{"approved": true}` lets it go).',
      params: {
        id: runId,
        name: { schema: SignalName, description: 'The signal’s name (an approval’s carries its nonce).' },
      },
      body: { schema: SignalPayload, required: false },
      answers: {
        202: { description: 'Delivered now.', json: SignalDelivered },
        200: {
          description: 'A signal of that name was delivered before; the first body is kept.',
          json: SignalRepeated,
        },
      },
      errors: {
        400: ['invalid_request'],
        404: ['run_not_found'],
        409: ['signal_not_awaited', 'run_finished'],
        413: ['signal_too_large'],
        415: ['unsupported_media_type'],
        429: ['too_many_signals'],
      },
    },
    'runs.feedback': {
      tag: 'memory',
      summary: 'Rate a run',
      params: { id: runId },
      body: { schema: FeedbackBody, required: true },
      answers: { 202: { description: 'Recorded.', json: FeedbackAccepted } },
      errors: { 400: ['invalid_request'], 404: ['run_not_found'], 409: ['reflect_off'] },
    },
    'blobs.get': {
      tag: 'runs',
      summary: 'Read a large node output',
      params: {
        hash: { schema: BlobHash, description: 'The stub’s `$blob` (`sha256:<hex>`), or the hex alone.' },
      },
      answers: {
        200: {
          description: 'The output as JSON, byte for byte the text that was hashed.',
          anyJson: true,
          headers: { ETag: '`"sha256:<hex>"`' },
        },
      },
      errors: { 400: ['invalid_request'], 404: ['blob_not_found'] },
    },
    'sessions.message': {
      tag: 'sessions',
      summary: 'Send a message to a session',
      description:
        'The API waits up to `TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS` (5 s) for the lane’s decision and answers with it.',
      params: { sessionKey },
      headers: {
        'Idempotency-Key': {
          schema: IdempotencyKey.unwrap(),
          description:
            'The message’s id, as its `eventId` (they must agree when both are given): a message sent again with it is taken in once.',
        },
      },
      body: { schema: MessageBody, required: true },
      answers: {
        202: {
          description: 'The lane’s decision (or `queued: true` when none came in time).',
          json: MessageAnswer,
        },
      },
      errors: {
        400: ['invalid_request'],
        409: ['session_agent_conflict'],
        422: ['message_failed'],
        429: ['lane_full'],
      },
    },
    'sessions.list': {
      tag: 'sessions',
      summary: 'List the tenant’s sessions with their lanes',
      query: {
        schema: SessionListQuery,
        describe: { limit: 'At most this many sessions.', cursor: 'The `nextCursor` of the previous page.' },
      },
      answers: {
        200: { description: 'Most recently written first, each with its lane.', json: SessionPage },
      },
      errors: { 400: ['invalid_request'] },
    },
    'sessions.get': {
      tag: 'sessions',
      summary: 'Read a session’s lane',
      params: { sessionKey },
      answers: { 200: { description: 'The lane.', json: SessionView } },
      errors: { 400: ['invalid_request'], 404: ['session_not_found'] },
    },
    'sessions.transcript': {
      tag: 'sessions',
      summary: 'Read a session’s transcript (JSON lines)',
      description:
        'One JSON object per line: a `TranscriptHeader` (`#/components/schemas/TranscriptHeader`), then up to `limit` `TranscriptEntry` lines.',
      params: { sessionKey },
      query: {
        schema: TranscriptQuery,
        describe: {
          after: 'The lines after this line number (without it: from the oldest kept).',
          limit: 'At most this many lines.',
        },
      },
      answers: { 200: { description: 'The page.', media: 'application/x-ndjson' } },
      errors: { 400: ['invalid_request'], 404: ['session_not_found'] },
    },
    'agui.run': {
      tag: 'sessions',
      summary: 'Run an agent over AG-UI (server-sent AG-UI events)',
      description:
        'AG-UI’s `RunAgentInput`: `threadId` is the session, the last message (a user’s) is sent to its lane, `context` and `state` reach the run as delimited outside data. The answer is the session run as AG-UI events, one JSON object per `data:` frame: `RUN_STARTED`, `STATE_SNAPSHOT` (the client’s state with the run under `tetraloop`), `STEP_STARTED`/`STEP_FINISHED` per node, `TEXT_MESSAGE_*` from the model’s token stream, `TOOL_CALL_*`, `STATE_DELTA` (JSON Patch), then `RUN_FINISHED` or `RUN_ERROR`. A run that waits for an approval, a budget decision or a signal ends the AG-UI run with an interrupt outcome; the next request answers it with `resume` (scope `signals:write` too) and follows the same run on. See docs/interop.md.',
      params: { agentId },
      body: { schema: AguiRunInput, required: true },
      answers: { 200: { description: 'The AG-UI event stream.', media: 'text/event-stream' } },
      errors: {
        400: ['invalid_request'],
        403: ['forbidden'],
        404: ['agent_not_found', 'interrupt_not_found'],
        409: ['session_agent_conflict', 'signal_not_awaited', 'run_finished', 'budget_not_raised'],
        413: ['signal_too_large'],
        422: ['message_failed'],
        429: ['lane_full', 'too_many_signals', 'too_many_streams'],
        503: ['message_not_placed', 'streams_at_capacity'],
      },
    },
    'sources.event': {
      tag: 'sessions',
      summary: 'Deliver a signed webhook event',
      description:
        'No API key: the body is signed with the source’s secret (`X-Tetraloop-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`). Checked in this order: source, media type, signature, body, session, replay.',
      params: { name: { schema: SourceName, description: 'A source of `TETRALOOP_WEBHOOKS`.' } },
      headers: {
        'X-Tetraloop-Signature': {
          schema: SignatureHeader,
          description: '`t=<unix seconds>,v1=<64 hex digits>`.',
          required: true,
        },
      },
      body: { schema: InboundEvent, required: true },
      answers: { 202: { description: 'Accepted (a duplicate too).', json: SourceEventAccepted } },
      errors: {
        400: ['invalid_request'],
        401: ['signature_missing', 'signature_malformed', 'signature_expired', 'signature_mismatch'],
        403: ['session_not_allowed'],
        404: ['source_not_found'],
        409: ['webhook_replayed'],
        415: ['unsupported_media_type'],
      },
    },
    'sources.list': {
      tag: 'sessions',
      summary: 'List the tenant’s event sources and their health',
      answers: { 200: { description: 'The sources, by name.', json: SourceList } },
      errors: {},
    },
    'agents.reflect': {
      tag: 'memory',
      summary: 'Ask for a reflection on an agent',
      params: { agentId },
      answers: {
        202: { description: 'Queued (a pending reflection is not doubled).', json: ReflectAccepted },
      },
      errors: { 400: ['invalid_request'], 409: ['reflect_off'] },
    },
    'a2a.card': {
      tag: 'a2a',
      summary: 'An agent’s A2A Agent Card',
      description:
        'The v1.0 card (`supportedInterfaces`: JSON-RPC 1.0 and 0.3 at `/v1/a2a/:agentId`) when the request says `A2A-Version: 1.0`; the v0.3 card (`url`, `preferredTransport`) without the header. The agent must be one the tenant may run. See docs/interop.md#a2a.',
      params: { agentId },
      headers: {
        'A2A-Version': {
          schema: A2AVersion,
          description: 'The A2A protocol version the client speaks (absent: 0.3).',
        },
      },
      answers: { 200: { description: 'The Agent Card.', anyJson: true } },
      errors: { 400: ['invalid_request'] },
    },
    'a2a.rpc': {
      tag: 'a2a',
      summary: 'A2A JSON-RPC: send (and stream) messages, get and cancel tasks',
      description:
        'One JSON-RPC 2.0 request per call. With `A2A-Version: 1.0`: `SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`; without the header (v0.3): `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`. A task is a run of the agent, its `contextId` the session. Answers are JSON-RPC responses (A2A errors inside them, with HTTP 200); the streaming methods answer server-sent events, one JSON-RPC response each. `CancelTask` also needs `runs:write`; a message naming a task (input for a run that waits) also needs `signals:write`. See docs/interop.md#a2a.',
      params: { agentId },
      headers: {
        'A2A-Version': {
          schema: A2AVersion,
          description: 'The A2A protocol version the client speaks (absent: 0.3).',
        },
      },
      body: { schema: A2ARequest, required: true, description: 'A JSON-RPC 2.0 request of A2A.' },
      answers: {
        200: {
          description:
            'A JSON-RPC response; for the streaming methods `text/event-stream`, each event’s data a JSON-RPC response.',
          anyJson: true,
        },
      },
      errors: {
        400: ['invalid_request'],
        429: ['too_many_streams', 'too_many_waits'],
        503: ['streams_at_capacity', 'waits_at_capacity'],
      },
    },
    'agents.lessons': {
      tag: 'memory',
      summary: 'List an agent’s lessons',
      params: { agentId },
      query: { schema: LessonsQuery, describe: { status: 'Only lessons of this status.' } },
      answers: { 200: { description: 'Most confident first.', json: AgentLessons } },
      errors: { 400: ['invalid_request'], 409: ['reflect_off'] },
    },
    'agents.memory': {
      tag: 'memory',
      summary: 'Read an agent’s memory',
      params: { agentId },
      query: { schema: MemoryQuery, describe: { limit: 'Run summaries to show, newest first.' } },
      answers: {
        200: { description: 'The hot set, the services and the reflection state.', json: AgentMemory },
      },
      errors: { 400: ['invalid_request'], 409: ['reflect_off'] },
    },
    'lessons.patch': {
      tag: 'memory',
      summary: 'Override a lesson’s status',
      params: { id: { schema: LessonId, description: 'The lesson id: `[<tenant>~]<agentId>.<12 hex>`.' } },
      body: { schema: LessonPatch, required: true },
      answers: { 200: { description: 'The lesson after the change.', json: Lesson } },
      errors: { 400: ['invalid_request'], 404: ['lesson_not_found'], 409: ['reflect_off'] },
    },
    'secrets.put': {
      tag: 'secrets',
      summary: 'Store or replace a secret, with the hosts and tools it may go to',
      params: { name: { schema: SecretName, description: 'The secret’s name.' } },
      body: { schema: SecretBody, required: true },
      answers: { 204: { description: 'Stored.' } },
      errors: {
        400: ['invalid_request'],
        404: ['secret_not_found'],
        409: ['secrets_off', 'too_many_secrets'],
        413: ['secret_too_large'],
      },
    },
    'secrets.list': {
      tag: 'secrets',
      summary: 'List the tenant’s secrets (names and scopes, never values)',
      answers: { 200: { description: 'Names, update times and scopes, by name.', json: SecretList } },
      errors: { 409: ['secrets_off'] },
    },
    'secrets.delete': {
      tag: 'secrets',
      summary: 'Delete a secret',
      params: { name: { schema: SecretName, description: 'The secret’s name.' } },
      answers: { 204: { description: 'Deleted.' } },
      errors: { 400: ['invalid_request'], 404: ['secret_not_found'], 409: ['secrets_off'] },
    },
    'webhooks.create': {
      tag: 'webhooks',
      summary: 'Subscribe to the events of every run of the tenant',
      description:
        'Each event (`run.finished` by default; `run.waiting`, `node.failed`) of each of the tenant’s runs is posted to `url` as JSON `{id, type, createdAt, data}`, signed in `X-Tetraloop-Signature` with the secret in this answer (shown only here), retried with backoff on 5xx, 429 and network errors. Deliveries go through the workers’ egress policy: a private address is refused unless allowlisted.',
      body: { schema: WebhookSubscriptionRequest, required: true },
      answers: {
        201: {
          description: 'Made; its secret is in this answer only.',
          json: WebhookCreated,
          headers: { Location: 'The subscription: `/v1/webhooks/<id>`.' },
        },
      },
      errors: { 400: ['invalid_request'], 409: ['secrets_off', 'too_many_webhooks'] },
    },
    'webhooks.list': {
      tag: 'webhooks',
      summary: 'List the tenant’s webhook subscriptions (never a secret)',
      answers: { 200: { description: 'Oldest first.', json: WebhookList } },
      errors: {},
    },
    'webhooks.secret': {
      tag: 'webhooks',
      summary: 'Make (or replace) the signing secret of runs’ own webhooks',
      description:
        'A run submitted with `webhook: {url, events?}` has its events signed with this tenant-wide secret; a tenant without one is refused such runs (`409 webhook_secret_missing`). Each call makes a new secret, replacing the one before for every attempt from now on; it is shown only here.',
      answers: { 201: { description: 'Made; shown only here.', json: WebhookSecret } },
      errors: { 409: ['secrets_off'] },
    },
    'webhooks.deliveries': {
      tag: 'webhooks',
      summary: 'A subscription’s recent delivery attempts',
      params: { id: webhookId },
      answers: {
        200: {
          description: 'Newest first, at most `TETRALOOP_WEBHOOK_DELIVERIES_KEPT`.',
          json: WebhookDeliveries,
        },
      },
      errors: { 404: ['webhook_not_found'] },
    },
    'webhooks.delete': {
      tag: 'webhooks',
      summary: 'Delete a webhook subscription',
      description: 'Its deliveries still waiting for a retry are dropped at their next attempt.',
      params: { id: webhookId },
      answers: { 204: { description: 'Deleted, with its delivery attempts.' } },
      errors: { 404: ['webhook_not_found'] },
    },
    'schedules.create': {
      tag: 'schedules',
      summary: 'Make a schedule that starts a run on a cron pattern or an interval',
      description:
        'A BullMQ job scheduler fires it: `cron` (five or six fields) read in `timezone` (IANA, default `UTC`), or `everyMs` (from 1 s; the first firing is at once). `request` is a run request, checked whole now as `POST /v1/runs` checks it. Each firing starts one run carrying `scheduleId` (an idempotency key made of the schedule and the due time: a firing handled twice is one run). `overlap`: `skip` (default: nothing while the last run is queued or running), `allow`, `cancel_previous`. `catchUp`: `none` (default: a firing more than 60 s late whose next one was already due is `missed`), `latest` (it runs, once).',
      body: { schema: ScheduleRequest, required: true },
      answers: {
        201: {
          description: 'Made.',
          json: ScheduleView,
          headers: { Location: 'The schedule: `/v1/schedules/<id>`.' },
        },
      },
      errors: { 400: ['invalid_request', 'invalid_graph'], 409: ['too_many_schedules'] },
    },
    'schedules.list': {
      tag: 'schedules',
      summary: 'List the tenant’s schedules',
      answers: {
        200: { description: 'Oldest first, each with its firings and next due time.', json: ScheduleList },
      },
      errors: {},
    },
    'schedules.get': {
      tag: 'schedules',
      summary: 'Read a schedule, what its firings did and when it fires next',
      params: { id: scheduleId },
      answers: { 200: { description: 'The schedule.', json: ScheduleView } },
      errors: { 404: ['schedule_not_found'] },
    },
    'schedules.patch': {
      tag: 'schedules',
      summary: 'Change a schedule: pause or resume it, its cadence, its request or its policies',
      description:
        'The fields given replace the stored ones, and the result is checked whole. A new `cron` replaces `everyMs` (keeping the zone unless one is given) and the other way round. `paused: true` removes its job scheduler; `false` makes it again.',
      params: { id: scheduleId },
      body: { schema: SchedulePatch, required: true },
      answers: { 200: { description: 'The schedule as changed.', json: ScheduleView } },
      errors: { 400: ['invalid_request', 'invalid_graph'], 404: ['schedule_not_found'] },
    },
    'schedules.delete': {
      tag: 'schedules',
      summary: 'Delete a schedule and its job scheduler',
      description: 'Its runs stay; they keep their `scheduleId`.',
      params: { id: scheduleId },
      answers: { 204: { description: 'Deleted.' } },
      errors: { 404: ['schedule_not_found'] },
    },
    'schedules.trigger': {
      tag: 'schedules',
      summary: 'Start the schedule’s run now',
      description:
        'Whatever its cadence, pause or overlap policy. The run carries `scheduleId` and becomes the schedule’s last run. A repeated `Idempotency-Key` answers the first trigger’s run.',
      params: { id: scheduleId },
      headers: {
        'Idempotency-Key': {
          schema: IdempotencyKey.unwrap(),
          description: 'Names the run: every trigger of this schedule with the same key gets the same run.',
        },
      },
      answers: {
        202: {
          description: 'Accepted.',
          json: RunAccepted,
          headers: { Location: 'The run: `/v1/runs/<runId>`.' },
        },
      },
      errors: { 400: ['invalid_request', 'invalid_graph'], 404: ['schedule_not_found'] },
    },
    'events.send': {
      tag: 'triggers',
      summary: 'Send an event',
      description:
        'An event of the caller’s tenant (`name`, `payload`, optional `id` and `key`) for its triggers: each trigger listening for `name` whose filter holds starts a run (at once, after its debounce’s quiet period, or with its batch). An `id` taken within the dedupe window (`TETRALOOP_EVENTS_DEDUPE_SECONDS`, a day by default) is taken once: the answer says `duplicate: true` and nothing more starts. Without an `id` one is made.',
      body: { schema: EventBody, required: true },
      answers: {
        202: { description: 'Taken (or a duplicate); triggers are matched after.', json: EventAccepted },
      },
      errors: { 400: ['invalid_request'] },
    },
    'triggers.create': {
      tag: 'triggers',
      summary: 'Make a trigger',
      description:
        'Runs started by events: `event` names the event, `filter` conditions on its fields (`eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `in`, `exists` at a `path` such as `payload.total`), `request` a whole run request whose `input` may read the event (`{"$ref": "event.payload.customer"}`, `"{{event.key}}"`; `events` for a batch’s list). `debounce: {key?, ms}` starts one run with the last event of a key after `ms` of quiet; `batch: {key?, maxSize, maxWaitMs}` one run per `maxSize` events, or with what arrived within `maxWaitMs`. The request is checked as `POST /v1/runs` checks it, each problem named under `request.`. Runs carry `triggerId` and `eventIds` (`GET /v1/runs?triggerId=`).',
      body: { schema: TriggerBody, required: true },
      answers: {
        201: {
          description: 'Made.',
          json: TriggerView,
          headers: { Location: 'The trigger: `/v1/triggers/<id>`.' },
        },
      },
      errors: {
        400: ['invalid_request', 'invalid_graph'],
        409: ['too_many_triggers', 'secrets_off', 'webhook_secret_missing'],
      },
    },
    'triggers.list': {
      tag: 'triggers',
      summary: 'List the tenant’s triggers',
      answers: { 200: { description: 'Oldest first.', json: TriggerList } },
      errors: {},
    },
    'triggers.get': {
      tag: 'triggers',
      summary: 'Read a trigger',
      params: { id: triggerId },
      answers: { 200: { description: 'The trigger.', json: TriggerView } },
      errors: { 404: ['trigger_not_found'] },
    },
    'triggers.delete': {
      tag: 'triggers',
      summary: 'Delete a trigger',
      description: 'Its waiting debounce and batch firings start nothing; its runs stay.',
      params: { id: triggerId },
      answers: { 204: { description: 'Deleted.' } },
      errors: { 404: ['trigger_not_found'] },
    },
    'keys.create': {
      tag: 'keys',
      summary: 'Make an API key',
      description:
        'An `admin` key makes keys of its own tenant with at most its own scopes, expiring no later than itself (a key with an expiry makes none without one): `403 forbidden` otherwise, its `issues` naming `tenant`, `scopes` or `expiresAt`. The root token makes keys of any tenant. The new key’s `createdBy` is the making key’s id, or `root`; revoking a key revokes the keys it made. The key itself is in this answer only.',
      body: { schema: KeyBody, required: true },
      answers: { 201: { description: 'Made.', json: KeyCreated } },
      errors: { 400: ['invalid_request'], 409: ['key_limit'] },
    },
    'keys.list': {
      tag: 'keys',
      summary: 'List API keys',
      description: 'The admin key’s tenant’s, or every tenant’s for the root token; never a secret.',
      query: {
        schema: KeyListQuery,
        describe: {
          createdBy:
            'Only the keys this key made (its id), or the operator made (`root`: the root token, or `tetraloop keys` on Redis directly); a key of another tenant than an admin key’s lists none.',
        },
      },
      answers: { 200: { description: 'Oldest first.', json: KeyList } },
      errors: { 400: ['invalid_request'] },
    },
    'keys.revoke': {
      tag: 'keys',
      summary: 'Revoke an API key',
      description: 'With it, every key it made, and every key those made.',
      params: { keyId: { schema: KeyIdParam, description: 'The key’s id (16 hex digits).' } },
      answers: { 204: { description: 'Revoked: refused from the next request on.' } },
      errors: { 404: ['key_not_found'] },
    },
    'tenants.delete': {
      tag: 'keys',
      summary: 'Delete a tenant with all its data',
      params: { tenant: { schema: TenantId, description: 'The tenant.' } },
      answers: { 200: { description: 'What was removed.', json: TenantDeleted } },
      errors: { 400: ['invalid_request'], 409: ['default_tenant'] },
    },
    'usage.get': {
      tag: 'usage',
      summary: "What the caller's tenant spent on model calls on one UTC day",
      description:
        'From the cost ledger: the day’s total and per agent, session and model, in USD priced by the price table (docs/flow-control.md#cost-ledger-and-budgets-in-money).',
      query: {
        schema: z.strictObject({ day: CostDay.optional() }),
        describe: { day: 'The UTC day, `YYYY-MM-DD`; today when absent.' },
      },
      answers: { 200: { description: 'The day’s spending.', json: DailyCost } },
      errors: { 400: ['invalid_request'] },
    },
    'tools.list': {
      tag: 'tools',
      summary: 'Every tool a graph may name',
      description:
        'The built-in tools, each MCP server’s and the custom tools worker processes serve (from the catalog in Redis), with their input schemas; a custom tool also with its output schema, queue, versions served or seen within TETRALOOP_TOOL_CATALOG_TTL, and live workers (docs/tools.md).',
      answers: { 200: { description: 'The tools, by name.', json: ToolList } },
      errors: {},
    },
    'limits.get': {
      tag: 'limits',
      summary: 'Read the flow limits in force and their counters',
      answers: { 200: { description: 'The limits and counters.', json: LimitsView } },
      errors: {},
    },
    'limits.put': {
      tag: 'limits',
      summary: 'Replace the flow limits',
      body: {
        schema: LimitsBody,
        required: true,
        description: '`{"limits": [...]}`, or the bare list as in `TETRALOOP_LIMITS`.',
      },
      answers: { 200: { description: 'The limits now in force.', json: LimitsView } },
      errors: { 400: ['invalid_request'] },
    },
    'limits.delete': {
      tag: 'limits',
      summary: 'Go back to the configured flow limits',
      answers: { 200: { description: 'The limits now in force.', json: LimitsView } },
      errors: {},
    },
    'mcp.message': {
      tag: 'protocols',
      summary: 'MCP over streamable HTTP: one message (or batch) to Tetraloop’s MCP tools',
      description:
        'The Model Context Protocol’s streamable HTTP transport, stateless: tools `run_graph`, `run_task`, `get_run`, `cancel_run`, `list_runs` and the resource `tetraloop://runs/{runId}`, acting for the key’s tenant (see docs/interop.md). `run_graph`, `run_task` and `cancel_run` also need `runs:write`; without it the tool answers an error. A request is answered as an event stream: its progress notifications (with a `progressToken`), then its answer. A message the SDK’s transport cannot take (an unsupported `MCP-Protocol-Version`) is answered by it with a JSON-RPC error.',
      headers: {
        Accept: {
          schema: z.string(),
          required: true,
          description: 'Both `application/json` and `text/event-stream`, as the transport asks.',
        },
      },
      body: { schema: McpMessage, required: true },
      answers: {
        200: {
          description:
            'The answer to the request(s) as server-sent events (`event: message`, each `data` a JSON-RPC message): progress notifications first, then the answer.',
          media: 'text/event-stream',
        },
        202: { description: 'Only notifications or answers were sent: accepted, nothing to answer.' },
      },
      errors: { 406: ['not_acceptable'], 415: ['unsupported_media_type'] },
    },
    'mcp.stream': {
      tag: 'protocols',
      summary: 'MCP’s stream for server-initiated messages: not offered (stateless endpoint)',
      description:
        'Always `405` with `Allow: POST`: a stateless MCP endpoint has no session to send messages of its own on, and MCP clients take a `405` as “no stream here”.',
      answers: {},
      errors: { 405: ['method_not_allowed'] },
    },
    ...langGraphOperations,
  };
}
