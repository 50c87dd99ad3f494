/**
 * LangGraph's Agent Protocol (the Agent Server API) as Tetraloop speaks it under `/langgraph`: the
 * request bodies it validates and the answers it gives, in the protocol's snake_case. Compact: the
 * fields `@langchain/langgraph-sdk` sends and reads; a field whose meaning Tetraloop cannot honour
 * is refused by name (`unsupported`), never ignored. Schemas only.
 */
import { z } from 'zod';
import { AgentId } from '../requests.js';

/** A field set to anything but null or undefined is refused: Tetraloop has no such thing. */
const unsupported = (what: string) =>
  z
    .unknown()
    .refine((v) => v === undefined || v === null, { message: `not supported by Tetraloop: ${what}` })
    .optional();

/** A thread id: a session key of the caller's tenant (a UUID, as the SDK makes them, fits). */
export const ThreadId = z
  .string()
  .regex(/^[A-Za-z0-9:_.@-]{1,128}$/, 'a thread id is 1–128 of A-Z a-z 0-9 : _ . @ -');

const Metadata = z.record(z.string(), z.unknown());

export const MultitaskStrategy = z.enum(['reject', 'interrupt', 'rollback', 'enqueue']);
export type MultitaskStrategy = z.infer<typeof MultitaskStrategy>;

export const StreamMode = z.enum(['values', 'updates', 'messages', 'messages-tuple', 'events']);
export type StreamMode = z.infer<typeof StreamMode>;

/** Body of `POST /langgraph/assistants/search`. */
export const LangGraphAssistantSearch = z.looseObject({
  graph_id: z.string().max(64).nullish(),
  name: z.string().max(64).nullish(),
  metadata: Metadata.nullish(),
  limit: z.number().int().min(1).max(100).default(10),
  offset: z.number().int().min(0).max(10_000).default(0),
});

/** Body of `POST /langgraph/assistants/:assistantId/versions`. */
export const LangGraphVersionSearch = z.looseObject({
  metadata: Metadata.nullish(),
  limit: z.number().int().min(1).max(100).default(10),
  offset: z.number().int().min(0).max(10_000).default(0),
});

/** Body of `POST /langgraph/threads`. */
export const LangGraphThreadCreate = z.looseObject({
  thread_id: ThreadId.nullish(),
  metadata: Metadata.nullish(),
  if_exists: z.enum(['raise', 'do_nothing']).nullish(),
  supersteps: unsupported('threads made from supersteps'),
  ttl: unsupported('a thread TTL (sessions expire after TETRALOOP_SESSION_IDLE_TTL_SECONDS idle)'),
});

/** Body of `POST /langgraph/threads/search`. */
export const LangGraphThreadSearch = z.looseObject({
  metadata: Metadata.nullish(),
  ids: z.array(ThreadId).max(100).nullish(),
  status: z.enum(['idle', 'busy', 'interrupted', 'error']).nullish(),
  limit: z.number().int().min(1).max(100).default(10),
  offset: z.number().int().min(0).max(900).default(0),
  sort_by: z.literal('updated_at').nullish(),
  sort_order: z.literal('desc').nullish(),
  values: unsupported('a search by state values'),
});

/** Body of `POST /langgraph/threads/:threadId/history`. */
export const LangGraphHistoryQuery = z.looseObject({
  limit: z.number().int().min(1).max(100).default(10),
  before: unsupported('paging history with `before`'),
  metadata: unsupported('a history search by metadata'),
  checkpoint: unsupported('history from a checkpoint'),
});

/** Body of every run creation (`/runs`, `/runs/stream`, `/runs/wait`, on a thread or stateless). */
export const LangGraphRunCreate = z.looseObject({
  assistant_id: AgentId,
  /** The state to start from: `{messages: [...]}`, whose last human message is the run's text. */
  input: z.unknown().optional(),
  metadata: Metadata.nullish(),
  config: z.looseObject({}).nullish(),
  context: z.unknown().optional(),
  stream_mode: z.union([StreamMode, z.array(StreamMode).max(5)]).nullish(),
  multitask_strategy: MultitaskStrategy.nullish(),
  if_not_exists: z.enum(['create', 'reject']).nullish(),
  on_disconnect: z.enum(['cancel', 'continue']).nullish(),
  command: unsupported('commands (resume a run with a signal: POST /v1/runs/:id/signals/:name)'),
  interrupt_before: unsupported('interrupts before nodes'),
  interrupt_after: unsupported('interrupts after nodes'),
  checkpoint: unsupported('runs from a checkpoint'),
  checkpoint_id: unsupported('runs from a checkpoint'),
  after_seconds: unsupported('delayed runs (schedules: POST /v1/schedules)'),
  webhook: unsupported('a run webhook here (POST /v1/runs takes `webhook`)'),
});
export type LangGraphRunCreate = z.infer<typeof LangGraphRunCreate>;

/** Query of `POST /langgraph/threads/:threadId/runs/:runId/cancel`. */
export const LangGraphCancelQuery = z.object({
  wait: z.enum(['0', '1', 'true', 'false']).optional(),
  action: z.enum(['interrupt', 'rollback']).optional(),
});

/** A namespace: labels without dots (`getItem` sends it dot-joined). */
const Namespace = z
  .array(
    z
      .string()
      .min(1)
      .max(128)
      .regex(/^[^.]*$/, 'a namespace label has no "."'),
  )
  .min(1)
  .max(10);

/** Body of `PUT /langgraph/store/items`. */
export const LangGraphStorePut = z.looseObject({
  namespace: Namespace,
  key: z.string().min(1).max(256),
  value: z.record(z.string(), z.unknown()),
  index: z.union([z.literal(false), z.null()]).optional(),
  ttl: unsupported('item TTLs (items stay until deleted; TETRALOOP_STORE_ITEMS_MAX bounds them)'),
});

/** Query of `GET /langgraph/store/items`. */
export const LangGraphStoreGet = z.object({
  namespace: z.string().min(1).max(1400),
  key: z.string().min(1).max(256),
  refresh_ttl: z.string().optional(),
});

/** Body of `DELETE /langgraph/store/items`. */
export const LangGraphStoreDelete = z.looseObject({
  namespace: Namespace,
  key: z.string().min(1).max(256),
});

/** Body of `POST /langgraph/store/items/search`. */
export const LangGraphStoreSearch = z.looseObject({
  namespace_prefix: z.array(z.string().max(128)).max(10).default([]),
  filter: z.record(z.string(), z.unknown()).nullish(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).max(1_000_000).default(0),
  query: unsupported('semantic search (a filter matches values by equality)'),
  refresh_ttl: z.boolean().nullish(),
});

/** Body of `POST /langgraph/store/namespaces`. */
export const LangGraphNamespaceSearch = z.looseObject({
  prefix: z.array(z.string().max(128)).max(10).nullish(),
  suffix: z.array(z.string().max(128)).max(10).nullish(),
  max_depth: z.number().int().min(1).max(10).nullish(),
  limit: z.number().int().min(1).max(1000).default(100),
  offset: z.number().int().min(0).max(1_000_000).default(0),
});

// --- answers -------------------------------------------------------------------------------

/** A message of a thread's state, as LangChain serialises one. */
export const LangGraphMessage = z.object({
  type: z.enum(['human', 'ai']),
  id: z.string(),
  content: z.string(),
});
export type LangGraphMessage = z.infer<typeof LangGraphMessage>;

/** A thread's (or a stateless run's) state: the conversation. */
export const LangGraphValues = z.object({ messages: z.array(LangGraphMessage) });
export type LangGraphValues = z.infer<typeof LangGraphValues>;

/** An assistant: one agent the tenant may run. */
export const LangGraphAssistant = z.object({
  assistant_id: z.string(),
  graph_id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  config: z.object({}),
  context: z.object({}),
  metadata: Metadata,
  version: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type LangGraphAssistant = z.infer<typeof LangGraphAssistant>;
export const LangGraphAssistantList = z.array(LangGraphAssistant);

export const LangGraphThread = z.object({
  thread_id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  state_updated_at: z.string(),
  metadata: Metadata,
  status: z.enum(['idle', 'busy']),
  values: LangGraphValues,
  interrupts: z.object({}),
});
export type LangGraphThread = z.infer<typeof LangGraphThread>;
export const LangGraphThreadList = z.array(LangGraphThread);

const Checkpoint = z.object({
  thread_id: z.string(),
  checkpoint_ns: z.string(),
  checkpoint_id: z.string(),
  checkpoint_map: z.null(),
});

export const LangGraphThreadState = z.object({
  values: LangGraphValues,
  next: z.array(z.string()),
  checkpoint: Checkpoint,
  metadata: Metadata,
  created_at: z.string().nullable(),
  parent_checkpoint: Checkpoint.nullable(),
  tasks: z.array(z.never()),
});
export type LangGraphThreadState = z.infer<typeof LangGraphThreadState>;
export const LangGraphThreadHistory = z.array(LangGraphThreadState);

export const LangGraphRunStatus = z.enum([
  'pending',
  'running',
  'error',
  'success',
  'timeout',
  'interrupted',
]);
export type LangGraphRunStatus = z.infer<typeof LangGraphRunStatus>;

export const LangGraphRun = z.object({
  run_id: z.string(),
  thread_id: z.string().nullable(),
  assistant_id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  status: LangGraphRunStatus,
  metadata: Metadata,
  multitask_strategy: MultitaskStrategy.nullable(),
});
export type LangGraphRun = z.infer<typeof LangGraphRun>;

/** What `wait` and `join` answer: the final state, or the error a failed run ended with. */
export const LangGraphRunResult = z.union([
  LangGraphValues,
  z.object({ __error__: z.object({ error: z.string(), message: z.string() }) }),
]);

export const LangGraphItem = z.object({
  namespace: z.array(z.string()),
  key: z.string(),
  value: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});
export const LangGraphItemList = z.object({ items: z.array(LangGraphItem) });
export const LangGraphNamespaceList = z.object({ namespaces: z.array(z.array(z.string())) });
