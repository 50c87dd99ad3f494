/**
 * `/langgraph`: LangGraph's Agent Protocol over Tetraloop, so `@langchain/langgraph-sdk`'s `Client`
 * works against it. Assistants are the agents the tenant may run; threads are sessions (a thread
 * id is a session key of the caller's tenant); a run on a thread is a message into its session's
 * lane (`multitask_strategy` picks the lane mode), a stateless run a loop-mode task run; the store
 * is each tenant's bounded `ItemStore`. Another tenant's thread or run is answered 404.
 */
import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { isTerminal, scopedName, unscopeName, type RunDocument } from '@tetraloop/core/domain';
import { RunRequest, RunStateConflictError, type RunWaiter } from '@tetraloop/core/runs';
import { SESSION_AGENT, replyOf } from '@tetraloop/core/sessions';
import type { ItemStore, SessionView } from '@tetraloop/core/state';
import type { z } from 'zod';
import { callerOf } from '../auth.js';
import { HttpError, zodToHttp } from '../http-errors.js';
import type { LongRequests } from '../long-requests.js';
import { MessageBody, RunIdParam } from '../requests.js';
import type { RouteName } from '../route-table.js';
import { followRun, openEventStream, type EventStreamDeps } from '../run-events.js';
import {
  placeMessage,
  type SessionName as NamedSession,
  type SessionsRouterDeps,
} from '../sessions-router.js';
import {
  historyOf,
  inputText,
  laneModeOf,
  namespacesOf,
  runOf,
  searchItems,
  stateOf,
  transcriptMessages,
  valuesOf,
  type TranscriptMessage,
} from './mapping.js';
import {
  LangGraphAssistantSearch,
  LangGraphCancelQuery,
  LangGraphHistoryQuery,
  LangGraphNamespaceSearch,
  LangGraphRunCreate,
  LangGraphStoreDelete,
  LangGraphStoreGet,
  LangGraphStorePut,
  LangGraphStoreSearch,
  LangGraphThreadCreate,
  LangGraphThreadSearch,
  LangGraphVersionSearch,
  StreamMode,
  ThreadId,
  type LangGraphAssistant,
  type LangGraphThread,
  type LangGraphValues,
  type MultitaskStrategy,
} from './protocol.js';
import { AgentId } from '../requests.js';
import { StreamTranslator, modesOf, sseOf } from './stream.js';

export interface LangGraphDeps extends SessionsRouterDeps, EventStreamDeps {
  readonly waiter: RunWaiter;
  readonly longRequests: LongRequests;
  /** `TETRALOOP_MAX_WAIT_MS`: the longest `wait` and `join` wait. */
  readonly maxWaitMs: number;
  /** Each tenant's store items. */
  readonly items: ItemStore;
  /** `TETRALOOP_STORE_VALUE_MAX_BYTES`: the largest item value, as JSON. */
  readonly storeValueMaxBytes: number;
}

/** Newest transcript lines a thread's state is read from. */
const STATE_LINES = 1000;
/** Largest thread metadata, as JSON. */
const METADATA_MAX_BYTES = 16_384;
/** When this API process started: the assistants' (the configuration's) creation time. */
const CONFIGURED_AT = new Date().toISOString();

function parsed<S extends z.ZodType>(schema: S, value: unknown, prefix: string[] = []): z.infer<S> {
  // An absent body is an empty one (every field of a body schema has its default).
  const result = schema.safeParse(value === undefined ? {} : value);
  if (!result.success) throw zodToHttp(result.error, prefix);
  return result.data;
}

const threadNotFound = (): HttpError => new HttpError(404, 'thread_not_found', 'no such thread');
const runNotFound = (): HttpError => new HttpError(404, 'run_not_found', 'no such run on this thread');

/** The thread a request names, as the caller's session. */
function threadOf(req: Request, res: Response): NamedSession {
  const id = ThreadId.safeParse(req.params.threadId);
  if (!id.success) throw threadNotFound();
  return { name: id.data, stored: scopedName(callerOf(res).tenant, id.data) };
}

const assistantOf = (agentId: string): LangGraphAssistant => ({
  assistant_id: agentId,
  graph_id: agentId,
  name: agentId,
  description: null,
  config: {},
  context: {},
  metadata: {},
  version: 1,
  created_at: CONFIGURED_AT,
  updated_at: CONFIGURED_AT,
});

export function langGraphHandlers(deps: LangGraphDeps): Partial<Record<RouteName, RequestHandler>> {
  const { sessionStore, runs } = deps;

  // --- threads ---------------------------------------------------------------------------

  const viewOf = async (session: NamedSession): Promise<SessionView> => {
    const view = await sessionStore.view(session.stored);
    if (!view) throw threadNotFound();
    return view;
  };

  /** The run holding the lane, while it has not settled. */
  const busy = async (view: SessionView): Promise<boolean> =>
    view.queued.length > 0 ||
    (view.running !== null && view.running !== 'collect' && (await runs.settled(view.running)) === false);

  /** A thread's messages, and its values with the answer of a settled run not written yet. */
  const stateOfThread = async (
    session: NamedSession,
    view: SessionView,
  ): Promise<{ messages: TranscriptMessage[]; values: LangGraphValues }> => {
    const { length } = await sessionStore.transcriptPage(session.stored, 0, 0);
    const page = await sessionStore.transcriptPage(
      session.stored,
      Math.max(0, length - STATE_LINES),
      STATE_LINES,
    );
    const messages = transcriptMessages(page.lines, page.from);
    let pending: { runId: string; text: string } | undefined;
    if (view.running && view.running !== 'collect') {
      const doc = await runs.get(view.running);
      const text = doc && isTerminal(doc.status) ? replyOf(doc, []).text : null;
      if (doc && text !== null) pending = { runId: doc.runId, text };
    }
    return { messages, values: valuesOf(messages, pending) };
  };

  const threadAnswer = async (session: NamedSession, view: SessionView): Promise<LangGraphThread> => {
    const [{ values, messages }, metadata, isBusy] = await Promise.all([
      stateOfThread(session, view),
      sessionStore.metadata(session.stored),
      busy(view),
    ]);
    const created = view.createdAt ?? CONFIGURED_AT;
    const updated = messages.at(-1)?.at ?? created;
    return {
      thread_id: session.name,
      created_at: created,
      updated_at: updated,
      state_updated_at: updated,
      metadata: metadata ? (JSON.parse(metadata) as Record<string, unknown>) : {},
      status: isBusy ? 'busy' : 'idle',
      values,
      interrupts: {},
    };
  };

  const createThread: RequestHandler = async (req, res) => {
    const body = parsed(LangGraphThreadCreate, req.body);
    const tenant = callerOf(res).tenant;
    const name = body.thread_id ?? randomUUID();
    const session = { name, stored: scopedName(tenant, name) };
    const existing = await sessionStore.view(session.stored);
    if (existing) {
      if (body.if_exists === 'do_nothing') return res.json(await threadAnswer(session, existing));
      throw new HttpError(409, 'thread_exists', `thread "${name}" exists`, [
        { path: 'thread_id', message: 'taken: send if_exists "do_nothing" to get it' },
      ]);
    }
    const metadata = JSON.stringify(body.metadata ?? {});
    if (Buffer.byteLength(metadata) > METADATA_MAX_BYTES) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        { path: 'metadata', message: `at most ${METADATA_MAX_BYTES} bytes as JSON` },
      ]);
    }
    // The SDK's `graphId` (metadata.graph_id) binds the session's agent, as a first message would.
    const graph = body.metadata?.graph_id;
    if (graph !== undefined && graph !== null) {
      const agentId = parsed(AgentId, graph, ['metadata', 'graph_id']);
      await runs.checkAgent(tenant, agentId);
      await sessionStore.bindAgent(session.stored, agentId);
    }
    await sessionStore.open(session.stored, metadata);
    res.json(await threadAnswer(session, await viewOf(session)));
  };

  const getThread: RequestHandler = async (req, res) => {
    const session = threadOf(req, res);
    res.json(await threadAnswer(session, await viewOf(session)));
  };

  const searchThreads: RequestHandler = async (req, res) => {
    const body = parsed(LangGraphThreadSearch, req.body);
    const tenant = callerOf(res).tenant;
    const page = await sessionStore.list(tenant, body.offset + body.limit, null);
    const threads: LangGraphThread[] = [];
    for (const listing of page.sessions.slice(body.offset)) {
      const session = { name: unscopeName(listing.sessionKey).name, stored: listing.sessionKey };
      if (body.ids && !body.ids.includes(session.name)) continue;
      const thread = await threadAnswer(session, listing);
      if (body.status && thread.status !== body.status) continue;
      const wanted = Object.entries(body.metadata ?? {});
      if (!wanted.every(([k, v]) => JSON.stringify(thread.metadata[k]) === JSON.stringify(v))) continue;
      threads.push({ ...thread, updated_at: listing.lastActiveAt });
    }
    res.json(threads);
  };

  const deleteThread: RequestHandler = async (req, res) => {
    const session = threadOf(req, res);
    await viewOf(session);
    // Its lane's runs are cancelled first: nothing of the thread runs on after it is gone. Each is
    // marked replied before, so settling writes no reply that would make the session again.
    const lane = await sessionStore.stop(session.stored);
    for (const runId of [lane.running, ...lane.queued]) {
      if (!runId) continue;
      await deps.store.markSessionReplied(runId);
      await runs.cancel(runId).catch((err: unknown) => {
        if (!(err instanceof RunStateConflictError)) throw err;
      });
    }
    await sessionStore.delete(session.stored);
    res.status(204).end();
  };

  const threadState: RequestHandler = async (req, res) => {
    const session = threadOf(req, res);
    const { messages, values } = await stateOfThread(session, await viewOf(session));
    res.json(stateOf(session.name, values, messages.at(-1)?.at ?? null));
  };

  const threadHistory: RequestHandler = async (req, res) => {
    const session = threadOf(req, res);
    const body = parsed(LangGraphHistoryQuery, req.body);
    const { messages, values } = await stateOfThread(session, await viewOf(session));
    res.json(historyOf(session.name, messages, values, body.limit));
  };

  // --- runs ------------------------------------------------------------------------------

  /** A run made by a request: where it is, and what it started from. */
  interface Started {
    readonly runId: string;
    readonly thread: NamedSession | null;
    readonly body: LangGraphRunCreate;
    readonly text: string;
    readonly strategy: MultitaskStrategy | null;
  }

  const textOf = (body: LangGraphRunCreate): string => {
    const text = inputText(body.input);
    if ('issue' in text) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        { path: 'input', message: text.issue },
      ]);
    }
    return text.text;
  };

  /** A run on a thread: a message into its session's lane, in the strategy's mode. */
  const startThreadRun = async (req: Request, res: Response): Promise<Started> => {
    const thread = threadOf(req, res);
    const body = parsed(LangGraphRunCreate, req.body);
    const text = textOf(body);
    const view = await sessionStore.view(thread.stored);
    if (!view && body.if_not_exists !== 'create') throw threadNotFound();
    const strategy = body.multitask_strategy ?? 'reject';
    if (strategy === 'reject' && view && (await busy(view))) {
      throw new HttpError(409, 'thread_busy', `thread "${thread.name}" has a run in progress`, [
        {
          path: 'multitask_strategy',
          message: 'reject: send "enqueue", "interrupt" or "rollback" to run anyway',
        },
      ]);
    }
    const message = parsed(
      MessageBody,
      {
        text,
        mode: laneModeOf(strategy),
        // Each run request is a run of its own, never a double submission of an earlier one.
        eventId: `langgraph:${randomUUID()}`,
        agentId: body.assistant_id,
        ...(body.metadata ? { metadata: body.metadata } : {}),
      },
      ['input'],
    );
    const placed = await placeMessage(deps, callerOf(res).tenant, thread, message, message.eventId);
    if (placed.command !== undefined) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        {
          path: 'input',
          message: `"${placed.command}" is a session command, not a run: send it to POST /v1/sessions/:sessionKey/messages`,
        },
      ]);
    }
    if (placed.runId === undefined) {
      res.set('Retry-After', '1');
      throw new HttpError(
        503,
        'not_placed',
        'the lane did not place the message in time; see the thread state',
      );
    }
    return { runId: placed.runId, thread, body, text, strategy };
  };

  /** A stateless run: a loop-mode task run of the assistant's agent. */
  const startStatelessRun = async (req: Request, res: Response): Promise<Started> => {
    const body = parsed(LangGraphRunCreate, req.body);
    const text = textOf(body);
    const request = parsed(RunRequest, {
      task: text,
      mode: 'loop',
      agentId: body.assistant_id,
      ...(body.metadata ? { metadata: body.metadata } : {}),
    });
    const result = await runs.submit(request, undefined, { tenant: callerOf(res).tenant });
    return { runId: result.runId, thread: null, body, text, strategy: null };
  };

  const locationOf = (s: Pick<Started, 'runId' | 'thread'>): string =>
    s.thread ? `/threads/${s.thread.name}/runs/${s.runId}` : `/runs/${s.runId}`;

  /** The state a run ends with: its thread's, or (stateless) its question and answer. */
  const finalValues = async (
    s: Pick<Started, 'thread' | 'text'>,
    doc: RunDocument,
  ): Promise<LangGraphValues> => {
    if (s.thread) return (await stateOfThread(s.thread, await viewOf(s.thread))).values;
    const answer = replyOf(doc, []).text;
    return valuesOf(
      [{ message: { type: 'human', id: `input-${doc.runId}`, content: s.text }, line: 0, at: null }],
      answer === null ? undefined : { runId: doc.runId, text: answer },
    );
  };

  const documentOf = async (runId: string): Promise<RunDocument> => {
    const doc = await runs.get(runId);
    if (!doc) throw runNotFound();
    return doc;
  };

  const create =
    (start: (req: Request, res: Response) => Promise<Started>): RequestHandler =>
    async (req, res) => {
      const started = await start(req, res);
      const doc = await documentOf(started.runId);
      res
        .set('Content-Location', locationOf(started))
        .json(runOf(doc, started.thread?.name ?? null, started.strategy));
    };

  /**
   * Streams a run in the LangGraph shape: `metadata`, the state at the start (`values`), the parts
   * of each run event, the final state or the run's `error`. `initial` is the state before.
   */
  const streamRun = async (
    req: Request,
    res: Response,
    s: Pick<Started, 'runId' | 'thread' | 'text'>,
    modes: ReadonlySet<StreamMode>,
    options: { afterSeq: number; cancelOnDisconnect: boolean },
  ): Promise<void> => {
    const release = deps.longRequests.admit('events', res);
    openEventStream(res, { 'content-location': locationOf(s) });
    let finished = false;
    if (options.cancelOnDisconnect) {
      res.on('close', () => {
        if (!finished) void runs.cancel(s.runId).catch(() => undefined);
      });
    }
    const translator = new StreamTranslator(modes, s.runId);
    const values = async (): Promise<void> => {
      if (!modes.has('values')) return;
      const doc = await documentOf(s.runId);
      res.write(sseOf({ event: 'values', data: await finalValues(s, doc) }));
    };
    try {
      res.write(sseOf({ event: 'metadata', data: { run_id: s.runId, thread_id: s.thread?.name ?? null } }));
      await values();
      await followRun(deps, s.runId, options.afterSeq, res, {
        event: async (e, final) => {
          for (const part of translator.partsOf(e)) res.write(sseOf(part, e.seq));
          if (!final) return false;
          finished = true;
          const { status, error } = (e.data ?? {}) as {
            status?: string;
            error?: { code?: string; message?: string };
          };
          if (status === 'failed' || status === 'timed_out') {
            res.write(
              sseOf({
                event: 'error',
                data: { error: error?.code ?? status, message: error?.message ?? status },
              }),
            );
          } else await values();
          return false;
        },
        keepAlive: () => res.write(': keep-alive\n\n'),
      });
    } catch {
      // The client went away or Redis did; either way this stream is over.
    } finally {
      release();
      res.end();
    }
  };

  const stream =
    (start: (req: Request, res: Response) => Promise<Started>): RequestHandler =>
    async (req, res) => {
      const started = await start(req, res);
      await streamRun(req, res, started, modesOf(started.body.stream_mode), {
        afterSeq: 0,
        cancelOnDisconnect: started.body.on_disconnect === 'cancel',
      });
    };

  /** Waits for a run to settle (at most TETRALOOP_MAX_WAIT_MS), then answers its final state. */
  const answerWhenSettled = async (
    res: Response,
    s: Pick<Started, 'runId' | 'thread' | 'text'>,
  ): Promise<void> => {
    if ((await runs.settled(s.runId)) === false) {
      const release = deps.longRequests.admit('wait', res);
      const gone = new AbortController();
      res.on('close', () => gone.abort());
      try {
        await deps.waiter.wait(
          s.runId,
          deps.maxWaitMs,
          async () => (await runs.settled(s.runId)) !== false,
          gone.signal,
        );
      } finally {
        release();
      }
      if (gone.signal.aborted) return;
    }
    const doc = await documentOf(s.runId);
    if (!doc.finishedAt) {
      throw new HttpError(
        408,
        'wait_timeout',
        `run ${s.runId} has not finished within TETRALOOP_MAX_WAIT_MS; join it again`,
      );
    }
    res.set('Content-Location', locationOf(s));
    if (doc.status === 'failed' || doc.status === 'timed_out') {
      res.json({
        __error__: { error: doc.error?.code ?? doc.status, message: doc.error?.message ?? doc.status },
      });
      return;
    }
    res.json(await finalValues(s, doc));
  };

  const wait =
    (start: (req: Request, res: Response) => Promise<Started>): RequestHandler =>
    async (req, res) => {
      await answerWhenSettled(res, await start(req, res));
    };

  /** A run of the thread the request names, of the caller's tenant. */
  const ownThreadRun = async (
    req: Request,
    res: Response,
  ): Promise<{ thread: NamedSession; doc: RunDocument }> => {
    const thread = threadOf(req, res);
    const runId = RunIdParam.safeParse(req.params.runId);
    if (!runId.success) throw runNotFound();
    const doc = await runs.get(runId.data);
    if (!doc || doc.tenant !== callerOf(res).tenant || doc.sessionKey !== thread.stored) throw runNotFound();
    return { thread, doc };
  };

  const getRun: RequestHandler = async (req, res) => {
    const { thread, doc } = await ownThreadRun(req, res);
    res.json(runOf(doc, thread.name, null));
  };

  const joinRun: RequestHandler = async (req, res) => {
    const { thread, doc } = await ownThreadRun(req, res);
    await answerWhenSettled(res, { runId: doc.runId, thread, text: '' });
  };

  const joinStream: RequestHandler = async (req, res) => {
    const { thread, doc } = await ownThreadRun(req, res);
    const raw = typeof req.query.stream_mode === 'string' ? req.query.stream_mode : undefined;
    let requested: unknown = raw;
    if (raw?.startsWith('[')) {
      try {
        requested = JSON.parse(raw);
      } catch {
        requested = raw;
      }
    }
    const modes = parsed(StreamMode.or(StreamMode.array().max(5)).nullable(), requested ?? null, [
      'query',
      'stream_mode',
    ]);
    const after = Number(req.get('last-event-id') ?? 0);
    await streamRun(req, res, { runId: doc.runId, thread, text: '' }, modesOf(modes), {
      afterSeq: Number.isSafeInteger(after) && after > 0 ? after : 0,
      cancelOnDisconnect: req.query.cancel_on_disconnect === '1',
    });
  };

  const cancelRun: RequestHandler = async (req, res) => {
    const { doc } = await ownThreadRun(req, res);
    const query = parsed(LangGraphCancelQuery, req.query, ['query']);
    await runs.cancel(doc.runId);
    if (query.wait === '1' || query.wait === 'true') {
      await deps.waiter.wait(
        doc.runId,
        deps.maxWaitMs,
        async () => (await runs.settled(doc.runId)) !== false,
      );
    }
    res.status(202).end();
  };

  // --- assistants ------------------------------------------------------------------------

  const agentsOf = (res: Response): Promise<string[]> => runs.agents(callerOf(res).tenant, SESSION_AGENT);

  const assistantNamed = async (req: Request, res: Response): Promise<LangGraphAssistant> => {
    const id = AgentId.safeParse(req.params.assistantId);
    if (!id.success || !(await agentsOf(res)).includes(id.data)) {
      throw new HttpError(404, 'assistant_not_found', 'no such assistant (agent) for this tenant');
    }
    return assistantOf(id.data);
  };

  const searchAssistants: RequestHandler = async (req, res) => {
    const body = parsed(LangGraphAssistantSearch, req.body);
    const metadata = Object.keys(body.metadata ?? {}).length > 0;
    const found = (await agentsOf(res))
      .filter(
        (id) => !metadata && (!body.graph_id || body.graph_id === id) && (!body.name || body.name === id),
      )
      .slice(body.offset, body.offset + body.limit);
    res.json(found.map(assistantOf));
  };

  const getAssistant: RequestHandler = async (req, res) => {
    res.json(await assistantNamed(req, res));
  };

  const assistantVersions: RequestHandler = async (req, res) => {
    const assistant = await assistantNamed(req, res);
    const body = parsed(LangGraphVersionSearch, req.body);
    res.json([assistant].slice(body.offset, body.offset + body.limit));
  };

  // --- store -----------------------------------------------------------------------------

  const putItem: RequestHandler = async (req, res) => {
    const body = parsed(LangGraphStorePut, req.body);
    const bytes = Buffer.byteLength(JSON.stringify(body.value));
    if (bytes > deps.storeValueMaxBytes) {
      throw new HttpError(
        413,
        'value_too_large',
        `the value is ${bytes} bytes as JSON; TETRALOOP_STORE_VALUE_MAX_BYTES is ${deps.storeValueMaxBytes}`,
        [{ path: 'value', message: `at most ${deps.storeValueMaxBytes} bytes as JSON` }],
      );
    }
    const tenant = callerOf(res).tenant;
    if ((await deps.items.put(tenant, body.namespace, body.key, body.value)) === 'full') {
      throw new HttpError(
        409,
        'store_full',
        `the tenant holds ${deps.items.options.maxPerTenant} items, its most (TETRALOOP_STORE_ITEMS_MAX); delete some first`,
        [{ path: 'key', message: `limit: ${deps.items.options.maxPerTenant}` }],
      );
    }
    res.status(204).end();
  };

  const getItem: RequestHandler = async (req, res) => {
    const query = parsed(LangGraphStoreGet, req.query, ['query']);
    const item = await deps.items.get(callerOf(res).tenant, query.namespace.split('.'), query.key);
    if (!item) throw new HttpError(404, 'item_not_found', 'no such item');
    res.json(item);
  };

  const deleteItem: RequestHandler = async (req, res) => {
    const body = parsed(LangGraphStoreDelete, req.body);
    await deps.items.delete(callerOf(res).tenant, body.namespace, body.key);
    res.status(204).end();
  };

  const searchStore: RequestHandler = async (req, res) => {
    const body = parsed(LangGraphStoreSearch, req.body);
    const items = await deps.items.all(callerOf(res).tenant);
    res.json({
      items: searchItems(items, {
        prefix: body.namespace_prefix,
        filter: body.filter ?? null,
        limit: body.limit,
        offset: body.offset,
      }),
    });
  };

  const listNamespaces: RequestHandler = async (req, res) => {
    const body = parsed(LangGraphNamespaceSearch, req.body);
    const items = await deps.items.all(callerOf(res).tenant);
    res.json({
      namespaces: namespacesOf(items, {
        prefix: body.prefix ?? null,
        suffix: body.suffix ?? null,
        maxDepth: body.max_depth ?? null,
        limit: body.limit,
        offset: body.offset,
      }),
    });
  };

  return {
    'langgraph.assistants.search': searchAssistants,
    'langgraph.assistants.get': getAssistant,
    'langgraph.assistants.versions': assistantVersions,
    'langgraph.threads.create': createThread,
    'langgraph.threads.search': searchThreads,
    'langgraph.threads.get': getThread,
    'langgraph.threads.delete': deleteThread,
    'langgraph.threads.state': threadState,
    'langgraph.threads.history': threadHistory,
    'langgraph.runs.create': create(startThreadRun),
    'langgraph.runs.stream': stream(startThreadRun),
    'langgraph.runs.wait': wait(startThreadRun),
    'langgraph.runs.get': getRun,
    'langgraph.runs.join': joinRun,
    'langgraph.runs.joinStream': joinStream,
    'langgraph.runs.cancel': cancelRun,
    'langgraph.stateless.create': create(startStatelessRun),
    'langgraph.stateless.stream': stream(startStatelessRun),
    'langgraph.stateless.wait': wait(startStatelessRun),
    'langgraph.store.put': putItem,
    'langgraph.store.get': getItem,
    'langgraph.store.delete': deleteItem,
    'langgraph.store.search': searchStore,
    'langgraph.store.namespaces': listNamespaces,
  };
}
