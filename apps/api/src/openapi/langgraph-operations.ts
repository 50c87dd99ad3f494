/**
 * The routes of LangGraph's Agent Protocol under `/langgraph`, for the OpenAPI document. Compact:
 * each route with the fields Tetraloop reads and answers (`langgraph/protocol.ts`), not the whole
 * Agent Protocol; docs/interop.md says what is supported.
 */
import { z } from 'zod';
import {
  LangGraphAssistant,
  LangGraphAssistantList,
  LangGraphAssistantSearch,
  LangGraphCancelQuery,
  LangGraphHistoryQuery,
  LangGraphItem,
  LangGraphItemList,
  LangGraphNamespaceList,
  LangGraphNamespaceSearch,
  LangGraphRun,
  LangGraphRunCreate,
  LangGraphRunResult,
  LangGraphStoreDelete,
  LangGraphStoreGet,
  LangGraphStorePut,
  LangGraphStoreSearch,
  LangGraphThread,
  LangGraphThreadCreate,
  LangGraphThreadHistory,
  LangGraphThreadList,
  LangGraphThreadSearch,
  LangGraphThreadState,
  LangGraphVersionSearch,
  ThreadId,
} from '../langgraph/protocol.js';
import { AgentId, RunIdParam } from '../requests.js';
import type { RouteName } from '../route-table.js';
import type { OperationSpec, ParameterSpec } from './operation-spec.js';

type LangGraphRoute = Extract<RouteName, `langgraph.${string}`>;

const tag = 'langgraph';
const threadId: ParameterSpec = {
  schema: ThreadId,
  description: 'The thread: a session key of the caller’s tenant.',
};
const runId: ParameterSpec = { schema: RunIdParam, description: 'The run id (a UUID).' };
const assistantId: ParameterSpec = { schema: AgentId, description: 'The assistant: an agent id.' };
const runLocation = { 'Content-Location': 'The run: `/threads/<threadId>/runs/<runId>` or `/runs/<runId>`.' };
const runBody = { schema: LangGraphRunCreate, required: true } as const;
const RUN_ERRORS = {
  400: ['invalid_request'],
  403: ['forbidden'],
  422: ['message_failed'],
  409: ['thread_busy', 'session_agent_conflict'],
  429: ['lane_full'],
  503: ['not_placed'],
};
const STATELESS_ERRORS = { 400: ['invalid_request', 'invalid_graph'] };
const streamAnswer = {
  200: {
    description:
      'Server-sent events: `metadata`, then by stream mode `values`, `updates`, `messages/metadata`, `messages/partial`, `messages/complete`, `messages` (messages-tuple), `events`; `error` when the run fails.',
    media: 'text/event-stream' as const,
    headers: runLocation,
  },
};
const waitAnswer = {
  200: {
    description: 'The final state (`{messages}`), or `{__error__}` for a run that failed.',
    json: LangGraphRunResult,
    headers: runLocation,
  },
};

export const langGraphOperations: { readonly [K in LangGraphRoute]: OperationSpec } = {
  'langgraph.assistants.search': {
    tag,
    summary: 'Search assistants (the agents the tenant may run)',
    body: { schema: LangGraphAssistantSearch, required: false },
    answers: { 200: { description: 'The assistants.', json: LangGraphAssistantList } },
    errors: {},
  },
  'langgraph.assistants.get': {
    tag,
    summary: 'Read an assistant',
    params: { assistantId },
    answers: { 200: { description: 'The assistant.', json: LangGraphAssistant } },
    errors: { 404: ['assistant_not_found'] },
  },
  'langgraph.assistants.versions': {
    tag,
    summary: 'List an assistant’s versions (one: the configuration in force)',
    params: { assistantId },
    body: { schema: LangGraphVersionSearch, required: false },
    answers: { 200: { description: 'Its versions.', json: LangGraphAssistantList } },
    errors: { 404: ['assistant_not_found'] },
  },
  'langgraph.threads.create': {
    tag,
    summary: 'Create a thread (a session)',
    body: { schema: LangGraphThreadCreate, required: false },
    answers: { 200: { description: 'The thread.', json: LangGraphThread } },
    errors: { 409: ['thread_exists'], 403: ['forbidden'] },
  },
  'langgraph.threads.search': {
    tag,
    summary: 'Search the tenant’s threads, most recently active first',
    body: { schema: LangGraphThreadSearch, required: false },
    answers: { 200: { description: 'The threads.', json: LangGraphThreadList } },
    errors: {},
  },
  'langgraph.threads.get': {
    tag,
    summary: 'Read a thread',
    params: { threadId },
    answers: { 200: { description: 'The thread.', json: LangGraphThread } },
    errors: { 404: ['thread_not_found'] },
  },
  'langgraph.threads.delete': {
    tag,
    summary: 'Delete a thread: its runs are cancelled, its session deleted',
    params: { threadId },
    answers: { 204: { description: 'Deleted.' } },
    errors: { 404: ['thread_not_found'] },
  },
  'langgraph.threads.state': {
    tag,
    summary: 'Read a thread’s state (its conversation)',
    params: { threadId },
    answers: { 200: { description: 'The state.', json: LangGraphThreadState } },
    errors: { 404: ['thread_not_found'] },
  },
  'langgraph.threads.history': {
    tag,
    summary: 'Read a thread’s states, newest first (one after each answer)',
    params: { threadId },
    body: { schema: LangGraphHistoryQuery, required: false },
    answers: { 200: { description: 'The states.', json: LangGraphThreadHistory } },
    errors: { 404: ['thread_not_found'] },
  },
  'langgraph.runs.create': {
    tag,
    summary: 'Start a background run on a thread (a message into its lane)',
    params: { threadId },
    body: runBody,
    answers: { 200: { description: 'The run.', json: LangGraphRun, headers: runLocation } },
    errors: { ...RUN_ERRORS, 404: ['thread_not_found', 'run_not_found'] },
  },
  'langgraph.runs.stream': {
    tag,
    summary: 'Start a run on a thread and stream it',
    params: { threadId },
    body: runBody,
    answers: streamAnswer,
    errors: { ...RUN_ERRORS, 404: ['thread_not_found'] },
  },
  'langgraph.runs.wait': {
    tag,
    summary: 'Start a run on a thread and wait for its final state',
    params: { threadId },
    body: runBody,
    answers: waitAnswer,
    errors: { ...RUN_ERRORS, 404: ['thread_not_found', 'run_not_found'], 408: ['wait_timeout'] },
  },
  'langgraph.runs.get': {
    tag,
    summary: 'Read a run of a thread',
    params: { threadId, runId },
    answers: { 200: { description: 'The run.', json: LangGraphRun } },
    errors: { 404: ['run_not_found'] },
  },
  'langgraph.runs.join': {
    tag,
    summary: 'Wait for a run of a thread and read the thread’s final state',
    params: { threadId, runId },
    answers: waitAnswer,
    errors: { 404: ['run_not_found', 'thread_not_found'], 408: ['wait_timeout'] },
  },
  'langgraph.runs.joinStream': {
    tag,
    summary: 'Stream a run of a thread (after `Last-Event-ID`)',
    params: { threadId, runId },
    query: {
      schema: z.object({
        stream_mode: z.string().optional(),
        cancel_on_disconnect: z.enum(['0', '1']).optional(),
      }),
      describe: {
        stream_mode: 'A stream mode, or a JSON list of them (default `values`).',
        cancel_on_disconnect: '`1`: cancel the run when the client goes away.',
      },
    },
    answers: streamAnswer,
    errors: { 404: ['run_not_found', 'thread_not_found'] },
  },
  'langgraph.runs.cancel': {
    tag,
    summary: 'Cancel a run of a thread (its status becomes `interrupted`)',
    params: { threadId, runId },
    query: {
      schema: LangGraphCancelQuery,
      describe: {
        wait: '`1`: answer once the run has settled.',
        action: '`interrupt` or `rollback` (both cancel; the run and its transcript lines stay).',
      },
    },
    answers: { 202: { description: 'Cancelled.' } },
    errors: { 404: ['run_not_found'], 409: ['run_finished'] },
  },
  'langgraph.stateless.create': {
    tag,
    summary: 'Start a background stateless run (a loop-mode task run)',
    body: runBody,
    answers: { 200: { description: 'The run.', json: LangGraphRun, headers: runLocation } },
    errors: { ...STATELESS_ERRORS, 404: ['run_not_found'] },
  },
  'langgraph.stateless.stream': {
    tag,
    summary: 'Start a stateless run and stream it',
    body: runBody,
    answers: streamAnswer,
    errors: STATELESS_ERRORS,
  },
  'langgraph.stateless.wait': {
    tag,
    summary: 'Start a stateless run and wait for its final state',
    body: runBody,
    answers: waitAnswer,
    errors: { ...STATELESS_ERRORS, 404: ['run_not_found'], 408: ['wait_timeout'] },
  },
  'langgraph.store.put': {
    tag,
    summary: 'Put a store item',
    body: { schema: LangGraphStorePut, required: true },
    answers: { 204: { description: 'Stored.' } },
    errors: { 409: ['store_full'], 413: ['value_too_large'] },
  },
  'langgraph.store.get': {
    tag,
    summary: 'Read a store item',
    query: {
      schema: LangGraphStoreGet,
      describe: {
        namespace: 'The namespace, its labels joined with `.`.',
        key: 'The item’s key.',
        refresh_ttl: 'Ignored: items have no TTL.',
      },
    },
    answers: { 200: { description: 'The item.', json: LangGraphItem } },
    errors: { 404: ['item_not_found'] },
  },
  'langgraph.store.delete': {
    tag,
    summary: 'Delete a store item',
    body: { schema: LangGraphStoreDelete, required: true },
    answers: { 204: { description: 'Gone (or was not there).' } },
    errors: {},
  },
  'langgraph.store.search': {
    tag,
    summary: 'Search store items under a namespace prefix, newest first',
    body: { schema: LangGraphStoreSearch, required: false },
    answers: { 200: { description: 'The items.', json: LangGraphItemList } },
    errors: {},
  },
  'langgraph.store.namespaces': {
    tag,
    summary: 'List the store’s namespaces',
    body: { schema: LangGraphNamespaceSearch, required: false },
    answers: { 200: { description: 'The namespaces.', json: LangGraphNamespaceList } },
    errors: {},
  },
};

/** The named components of the LangGraph routes' answers. */
export const LANGGRAPH_ANSWERS = {
  LangGraphAssistant,
  LangGraphAssistantList,
  LangGraphThread,
  LangGraphThreadList,
  LangGraphThreadState,
  LangGraphThreadHistory,
  LangGraphRun,
  LangGraphRunResult,
  LangGraphItem,
  LangGraphItemList,
  LangGraphNamespaceList,
} as const;

/** The named components of the LangGraph routes' bodies. */
export const LANGGRAPH_REQUESTS = {
  LangGraphAssistantSearch,
  LangGraphVersionSearch,
  LangGraphThreadCreate,
  LangGraphThreadSearch,
  LangGraphHistoryQuery,
  LangGraphRunCreate,
  LangGraphStorePut,
  LangGraphStoreDelete,
  LangGraphStoreSearch,
  LangGraphNamespaceSearch,
} as const;
