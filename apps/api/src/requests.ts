/**
 * What the API reads from a request beyond the run request and the core's own schemas: path
 * parameters, queries, headers and bodies. The handlers validate with these, and the OpenAPI
 * document is generated from them (`openapi.ts`), so the two cannot disagree.
 */
import {
  EventRequest,
  KEY_MAKER_PATTERN,
  RunStatus,
  RunTag,
  OriginId,
  SCOPES,
  SIGNAL_NAME_PATTERN,
  TenantId,
} from '@tetraloop/core/domain';
import { LimitDefinition, LimitsDocument, MAX_LIMITS } from '@tetraloop/core/flow';
import { RUN_SEARCH_DEFAULT_LIMIT, RUN_SEARCH_MAX_LIMIT } from '@tetraloop/core/insight';
import { LESSON_STATUSES } from '@tetraloop/core/memory';
import { Thinking } from '@tetraloop/core/model';
import { SecretGrant } from '@tetraloop/core/runs';
import { SecretScope } from '@tetraloop/core/secrets';
import { QUEUE_ARGUMENTS, SessionKey, parseQueueCommand } from '@tetraloop/core/sessions';
import { LANE_MODES } from '@tetraloop/core/state';
import { TriggerId, TriggerRequest } from '@tetraloop/core/triggers';
import { z } from 'zod';

export { SessionKey };

/** A run's id: a UUID. Any other id names no run (`404 run_not_found`, not `400`). */
export const RunIdParam = z.uuid();

/** A signal's name: wait nodes' own (64 characters at most) and approvals' longer ones. */
export const SignalName = z.string().regex(SIGNAL_NAME_PATTERN, 'must match [A-Za-z0-9_.-]{1,256}');

/** A blob as its stub names it (`sha256:<hex>`), or the bare hex. */
export const BlobHash = z
  .string()
  .regex(/^(sha256:)?[0-9a-f]{64}$/, 'must be sha256:<64 lowercase hex digits> or the 64 hex digits');

export const SourceName = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}');

export const AgentId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match [A-Za-z0-9_-]{1,64}');

/**
 * `[<tenant>~]<agentId>.<12 hex>`: the agent a lesson belongs to, within its tenant, is part of its
 * id.
 */
export const LessonId = z
  .string()
  .regex(
    /^([a-z0-9][a-z0-9-]{0,39}~)?[A-Za-z0-9_-]{1,64}\.[0-9a-f]{12}$/,
    'must be [<tenant>~]<agentId>.<12 hex digits>',
  );

/** A key's id: the 16 hex digits after `tl_` in the key. */
export const KeyIdParam = z.string().regex(/^[0-9a-f]{16}$/);

export { TenantId };

/** `Idempotency-Key` of `POST /v1/runs`: names the run the request makes. */
export const IdempotencyKey = z.string().min(1).max(255).optional();

/** `?expand=blobs`: the document with each stub in `output` and `nodes.*.output` replaced by its content. */
const Expand = z.literal('blobs').optional();

/** `GET /v1/runs/:id`: other query parameters are ignored. */
export const ReadQuery = z.object({ expand: Expand });

/** `GET /v1/runs/:id/wait`: how long to wait, at most the deployment's `TETRALOOP_MAX_WAIT_MS`. */
export const waitQuery = (maxWaitMs: number) =>
  z.strictObject({
    timeoutMs: z.coerce.number().int().min(0).max(maxWaitMs).default(30_000),
    expand: Expand,
    /** Cancel the run when the waiting client goes away before it settles (needs `runs:write`). */
    abortOnDisconnect: z
      .enum(['true', 'false'])
      .default('false')
      .transform((v) => v === 'true'),
  });

/**
 * Where an event stream starts: after this sequence number (`Last-Event-ID`, else `?after`); a
 * value that is not a non-negative integer starts at the first event.
 */
export const EventCursor = z.coerce.number().int().min(0).catch(0);

/** `GET /v1/runs/:id/events`: `after` when no `Last-Event-ID` is sent; other parameters are ignored. */
export const EventsQuery = z.object({ after: EventCursor });

/**
 * `X-Tetraloop-Signature` of a webhook: `t=<unix seconds>,v1=<hex HMAC-SHA256>` (several `v1` may
 * be given); `verifyWebhookSignature` reads it, refusing it missing, malformed, expired or wrong.
 */
export const SignatureHeader = z.string();

/**
 * A transcript page: the lines after line number `after` (from the oldest kept without it), at
 * most `limit` of them.
 */
export const TranscriptQuery = z.strictObject({
  after: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  limit: z.coerce.number().int().min(1).max(10_000).default(1000),
});

/** `GET /v1/runs`: filters, newest first, a page at a time. */
export const RunSearchQuery = z.strictObject({
  status: RunStatus.optional(),
  agentId: AgentId.optional(),
  sessionKey: SessionKey.optional(),
  tag: RunTag.optional(),
  scheduleId: OriginId.optional(),
  triggerId: OriginId.optional(),
  since: z.string().max(64).optional(),
  until: z.string().max(64).optional(),
  limit: z.coerce.number().int().min(1).max(RUN_SEARCH_MAX_LIMIT).default(RUN_SEARCH_DEFAULT_LIMIT),
  cursor: z.string().max(200).optional(),
});
export type RunSearchQuery = z.infer<typeof RunSearchQuery>;

/** Body of `POST /v1/runs/:id/rerun`: the node (an id of the run document's `nodes`) to run again from. */
export const RerunBody = z.strictObject({ from: z.string().min(1).max(1000) });

/** A page of the tenant's sessions, most recently written first. */
export const SessionListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(RUN_SEARCH_MAX_LIMIT).default(RUN_SEARCH_DEFAULT_LIMIT),
  cursor: z.string().max(400).optional(),
});

export const LessonsQuery = z.strictObject({ status: z.enum(LESSON_STATUSES).optional() });

export const MemoryQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(10_000).default(200) });

/** Body of `POST /v1/sessions/:sessionKey/messages`. */
export const MessageBody = z.strictObject({
  text: z
    .string()
    .min(1)
    .max(20_000)
    .refine((text) => parseQueueCommand(text) !== 'invalid', {
      message: `/queue takes one of: ${QUEUE_ARGUMENTS.join(', ')}`,
    }),
  mode: z.enum(LANE_MODES).optional(),
  eventId: z.string().min(1).max(256).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  /**
   * The agent the session runs (default `main`): a session's first message binds it; a later
   * message naming another agent is refused (409 `session_agent_conflict`).
   */
  agentId: AgentId.optional(),
  /** The model this message's run calls, instead of the deployment's; one the operator allows. */
  model: z.string().min(1).max(200).optional(),
  /** This message's run: how hard a reasoning model thinks, `"low"` or `{effort?, summary?}`. */
  thinking: Thinking.optional(),
  /** The tenant secrets this message's run grants the nodes a model plans for it. */
  secrets: SecretGrant.optional(),
});
export type MessageBody = z.infer<typeof MessageBody>;

/** Body of `POST /v1/runs/:id/signals/:name`: any JSON, the signal's payload (`null` without a body). */
export const SignalPayload = z.unknown();

/** Body of `POST /v1/runs/:id/feedback`. */
export const FeedbackBody = z.strictObject({
  score: z.number().min(-1).max(1),
  comment: z.string().max(2000).optional(),
});

/** Body of `PATCH /v1/lessons/:id`. */
export const LessonPatch = z.strictObject({ status: z.enum(['active', 'retired', 'pinned']) });

/** Body of `PUT /v1/secrets/:name`: the value, never shown again. */
export const SecretBody = z
  .strictObject({
    /** The value; leave it out to change only where an existing secret may go. */
    value: z.string().min(1, 'a secret is not empty').optional(),
    /** Hosts an `http` call may send it to: names, `*.example.com`, addresses, `:port`; `["*"]` for any. */
    hosts: SecretScope.shape.hosts.optional(),
    /** Other tools it may be given to (`mcp.crm.lookup`). */
    tools: SecretScope.shape.tools.optional(),
  })
  .refine((b) => (b.hosts?.length ?? 0) + (b.tools?.length ?? 0) > 0, {
    message:
      'a secret says where it may go: give "hosts" (the hosts an http call may send it to; ["*"] for any) or "tools"',
    path: ['hosts'],
  });

/** Body of `POST /v1/keys`. */
export const KeyBody = z.strictObject({
  /** The key's tenant; an admin key may only name its own (the default). */
  tenant: TenantId.optional(),
  scopes: z.array(z.enum(SCOPES)).min(1).max(SCOPES.length),
  name: z.string().min(1).max(100).optional(),
  expiresAt: z.iso
    .datetime({ offset: true })
    .refine((at) => Date.parse(at) > Date.now(), 'must be in the future')
    .optional(),
});

/** `GET /v1/keys`: other query parameters are refused. */
export const KeyListQuery = z.strictObject({
  /** Only the keys this key made (its id), or the operator made (`root`). */
  createdBy: z.string().regex(KEY_MAKER_PATTERN, 'must be a key id (16 hex digits) or root').optional(),
});

/**
 * What `PUT /v1/limits` takes besides `{"limits": [...]}`: the bare list, as in `TETRALOOP_LIMITS`.
 * It is read as `{"limits": <the list>}` (`limitsDocumentOf`) and checked as a `LimitsDocument`.
 */
export const LimitsList = z.array(LimitDefinition).max(MAX_LIMITS);

/** The body of `PUT /v1/limits` as a `LimitsDocument` to check: a bare list is its `limits`. */
export const limitsDocumentOf = (body: unknown): unknown =>
  Array.isArray(body) ? { limits: body as unknown[] } : body;

/** What `PUT /v1/limits` takes: a limits document or the bare list. */
export const LimitsBody = z.union([LimitsDocument, LimitsList]);

/** Body of `POST /v1/events`. */
export const EventBody = EventRequest;
/** Body of `POST /v1/triggers`. */
export const TriggerBody = TriggerRequest;
/** A trigger's id in a path (`trg_…`). */
export const TriggerIdParam = TriggerId;

/**
 * An A2A call as the JSON-RPC transport takes it (`POST /v1/a2a/:agentId`); the SDK's transport
 * checks the method's params.
 */
export const A2ARequest = z.looseObject({
  jsonrpc: z.literal('2.0'),
  id: z.union([z.string(), z.number().int(), z.null()]).optional(),
  method: z.string(),
  params: z.record(z.string(), z.unknown()).optional(),
});
