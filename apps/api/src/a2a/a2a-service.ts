/**
 * A2A's methods over Tetraloop's sessions and runs, as the SDK's `A2ARequestHandler`: the SDK's
 * JSON-RPC transports (v1.0 and v0.3) parse the requests and shape the answers; this answers them.
 * A message without a task is a session message (its `contextId` names the session) whose run is
 * the task; a message naming a task that waits for input delivers the signal it waits for.
 * Push notifications, ListTasks and the extended card are not offered.
 */
import { randomUUID } from 'node:crypto';
import {
  TaskState,
  type AgentCard,
  type CancelTaskRequest,
  type GetExtendedAgentCardRequest,
  type GetTaskRequest,
  type ListTaskPushNotificationConfigsResponse,
  type ListTasksResponse,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import {
  BudgetDecision,
  isBudgetSignal,
  isTerminal,
  scopedName,
  type Caller,
  type RunDocument,
  type SignalLimits,
} from '@tetraloop/core/domain';
import type { RunEventHub } from '@tetraloop/core/runs';
import { SESSION_AGENT } from '@tetraloop/core/sessions';
import { RequestRefusedError } from '@tetraloop/core/runs';
import type { Logger } from 'pino';
import { HttpError } from '../http-errors.js';
import { MessageBody, RunIdParam, SessionKey } from '../requests.js';
import { placeMessage, type SessionsRouterDeps } from '../sessions-router.js';
import { agentCard } from './card.js';
import {
  agentMessageIn,
  answerChunk,
  artifactsOf,
  artifactUpdate,
  awaitedSignals,
  isFinalState,
  endsWaiting,
  MessageRefusal,
  messageText,
  signalPayloadOf,
  statusUpdate,
  taskOf,
  taskStateOf,
  textPart,
} from './tasks.js';

export interface A2AServiceDeps extends SessionsRouterDeps {
  readonly hub: RunEventHub;
  readonly signalLimits: SignalLimits;
  /** The longest a blocking `SendMessage` waits for its task to settle or ask for input. */
  readonly maxWaitMs: number;
  readonly logger: Logger;
}

/** Who calls, for which agent, and a signal that fires when the client goes away. */
export interface A2ACall {
  readonly caller: Caller;
  readonly agentId: string;
  readonly closed: AbortSignal;
}

/** Where the transport's context carries the call (`ServerCallContext.state`). */
export const A2A_CALL = 'tetraloop.call';

const callOf = (context: ServerCallContext): A2ACall => {
  const call = context.state.get(A2A_CALL) as A2ACall | undefined;
  if (!call) throw new Error('an A2A call without its caller');
  return call;
};

/** Events after which the task's state may have moved: the document is read again. */
const STATE_EVENTS = new Set([
  'run.started',
  'run.resumed',
  'run.decided',
  'run.finished',
  'signal.awaited',
  'signal.received',
  'node.succeeded',
  'node.failed',
  'node.cancelled',
]);

/** How long a stream's read waits for events before it looks whether to go on. */
const FOLLOW_SLICE_MS = 15_000;

/** A message taken in: the task's run (and the signal it delivered to it), or the agent's answer. */
type Started = { readonly doc: RunDocument; readonly delivered?: string } | { readonly message: Message };

/** What following a run brings: streamed text, or the run's document after its state may have moved. */
type RunUpdate = { readonly text: string } | { readonly doc: RunDocument };

export class A2AService implements A2ARequestHandler {
  constructor(private readonly deps: A2AServiceDeps) {}

  /** A card for version checks only (the routes serve each agent's own, with its URL). */
  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(agentCard(SESSION_AGENT, ''));
  }

  getAuthenticatedExtendedAgentCard(
    _params: GetExtendedAgentCardRequest,
    _context: ServerCallContext,
  ): Promise<AgentCard> {
    return Promise.reject(new ExtendedAgentCardNotConfiguredError());
  }

  sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    return this.guard(async () => {
      const call = callOf(context);
      const started = await this.start(params, call);
      if ('message' in started) return started.message;
      let { doc } = started;
      if (params.configuration?.returnImmediately || endsWaiting(doc, started.delivered)) return taskOf(doc);
      // Blocking: until the task settles or asks for input, or the longest wait passes.
      const deadline = Date.now() + this.deps.maxWaitMs;
      for await (const update of this.follow(doc.runId, call.closed, deadline)) {
        if (!('doc' in update)) continue;
        doc = update.doc;
        if (endsWaiting(doc, started.delivered)) break;
      }
      return taskOf(doc);
    });
  }

  sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    return this.guardStream(this.messageStream(params, callOf(context)));
  }

  resubscribe(
    params: SubscribeToTaskRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    return this.guardStream(this.taskStream(params.id, callOf(context)));
  }

  private async *messageStream(
    params: SendMessageRequest,
    call: A2ACall,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const started = await this.start(params, call);
    if ('message' in started) {
      yield { payload: { $case: 'message', value: started.message } };
      return;
    }
    yield* this.stream(started.doc, call, started.delivered);
  }

  private async *taskStream(taskId: string, call: A2ACall): AsyncGenerator<StreamResponse, void, undefined> {
    const doc = await this.ownTask(taskId, call);
    if (isFinalState(taskStateOf(doc))) {
      throw new UnsupportedOperationError(`task ${doc.runId} has ended: read it with GetTask`);
    }
    yield* this.stream(doc, call);
  }

  getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    return this.guard(async () => taskOf(await this.ownTask(params.id, callOf(context))));
  }

  cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    return this.guard(async () => {
      const doc = await this.ownTask(params.id, callOf(context));
      if (isTerminal(doc.status)) {
        throw new TaskNotCancelableError(`task ${doc.runId} has ended (${doc.status})`);
      }
      await this.deps.runs.cancel(doc.runId);
      return taskOf((await this.deps.runs.get(doc.runId)) ?? doc);
    });
  }

  listTasks(): Promise<ListTasksResponse> {
    return Promise.reject(
      new UnsupportedOperationError(
        'ListTasks is not offered: list the runs with GET /v1/runs?agentId=&sessionKey=',
      ),
    );
  }

  createTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    return Promise.reject(new PushNotificationNotSupportedError());
  }

  getTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    return Promise.reject(new PushNotificationNotSupportedError());
  }

  listTaskPushNotificationConfigs(): Promise<ListTaskPushNotificationConfigsResponse> {
    return Promise.reject(new PushNotificationNotSupportedError());
  }

  deleteTaskPushNotificationConfig(): Promise<void> {
    return Promise.reject(new PushNotificationNotSupportedError());
  }

  /**
   * Takes the message in: a new task's run in its context's session, or the input a waiting
   * task asked for. Answers the run's document, or a message for a session command (`/reset`…).
   */
  private async start(params: SendMessageRequest, call: A2ACall): Promise<Started> {
    const { message } = params;
    if (!message) throw new MessageRefusal('message', 'is required');
    if (params.tenant && params.tenant !== call.caller.tenant) {
      throw new MessageRefusal('tenant', 'the API key decides the tenant: leave it out');
    }
    return message.taskId ? this.deliverInput(message, call) : this.newTask(message, call);
  }

  private async newTask(message: Message, call: A2ACall): Promise<Started> {
    const { tenant } = call.caller;
    const contextId = message.contextId || randomUUID();
    const key = SessionKey.safeParse(contextId);
    if (!key.success) {
      throw new MessageRefusal('message.contextId', key.error.issues[0]?.message ?? 'not a session key');
    }
    const body = MessageBody.safeParse({
      text: messageText(message),
      // Each message is a task of its own: it waits its turn in the session's lane.
      mode: 'followup',
      agentId: call.agentId,
      ...(message.metadata ? { metadata: message.metadata } : {}),
    });
    if (!body.success) {
      const issue = body.error.issues[0];
      const field = issue?.path[0] === 'text' ? 'message.parts' : `message.${issue?.path.join('.') ?? ''}`;
      throw new MessageRefusal(field, issue?.message ?? 'invalid');
    }
    if (message.messageId.length > 256) {
      throw new MessageRefusal('message.messageId', 'at most 256 characters');
    }
    // The message id is the session message's id: a message sent again is taken in once.
    const placed = await placeMessage(
      this.deps,
      tenant,
      { name: key.data, stored: scopedName(tenant, key.data) },
      body.data,
      message.messageId || undefined,
    );
    if (placed.command) {
      return { message: agentMessageIn(key.data, '', [textPart(`session command /${placed.command} done`)]) };
    }
    if (placed.duplicate) {
      throw new MessageRefusal('message.messageId', 'a message with this id was taken in before');
    }
    if (!placed.runId) {
      throw new A2AError(
        'the message was queued but not placed in time (TETRALOOP_MESSAGE_PLACE_TIMEOUT_MS): no task can be named yet; send it again with the same messageId',
      );
    }
    const doc = await this.deps.runs.get(placed.runId);
    if (!doc) throw new TaskNotFoundError(`task ${placed.runId} is gone`);
    return { doc };
  }

  /** A message naming a task that waits: its content is the signal the run waits for. */
  private async deliverInput(message: Message, call: A2ACall): Promise<Started> {
    const doc = await this.ownTask(message.taskId, call);
    if (message.contextId && message.contextId !== taskOf(doc).contextId) {
      throw new MessageRefusal('message.contextId', `task ${doc.runId} belongs to another context`);
    }
    const state = taskStateOf(doc);
    if (state !== TaskState.TASK_STATE_INPUT_REQUIRED) {
      throw new MessageRefusal(
        'message.taskId',
        `task ${doc.runId} does not wait for input (it is ${TaskState[state]}): send the message without a taskId for a new task`,
      );
    }
    const awaited = awaitedSignals(doc).map((a) => a.signal);
    const named = message.metadata?.signal as unknown;
    let signal: string | undefined;
    if (named === undefined) {
      if (awaited.length > 1) {
        throw new MessageRefusal(
          'message.metadata.signal',
          `the run waits for several signals: name one of ${awaited.join(', ')}`,
        );
      }
      signal = awaited[0];
    } else if (typeof named === 'string' && awaited.includes(named)) {
      signal = named;
    }
    if (signal === undefined) {
      throw new MessageRefusal(
        'message.metadata.signal',
        `not awaited: the run waits for ${awaited.join(', ')}`,
      );
    }
    const payload = signalPayloadOf(message);
    if (isBudgetSignal(signal) && !BudgetDecision.safeParse(payload).success) {
      throw new MessageRefusal(
        'message.parts',
        'a budget decision is a data part {"costUsd": n} or {"stop": true}',
      );
    }
    const { keyId, tenant } = call.caller;
    const decision = { keyId, tenant, at: new Date().toISOString() };
    const result = await this.deps.runs.signal(doc.runId, signal, payload, decision, this.deps.signalLimits);
    if (result.outcome === 'unknown_run') throw new TaskNotFoundError(`no task ${doc.runId}`);
    if (result.outcome === 'refused')
      throw new MessageRefusal('message', `${result.code}: ${result.message}`);
    return { doc: (await this.deps.runs.get(doc.runId)) ?? doc, delivered: signal };
  }

  /** The caller's task of this agent; any other run (another tenant's, another agent's) is not found. */
  private async ownTask(taskId: string, call: A2ACall): Promise<RunDocument> {
    const doc = RunIdParam.safeParse(taskId).success ? await this.deps.runs.get(taskId) : null;
    if (!doc || doc.tenant !== call.caller.tenant || doc.agentId !== call.agentId) {
      throw new TaskNotFoundError(`no task ${taskId}`);
    }
    return doc;
  }

  /**
   * The task, then its updates as A2A stream events until it settles or asks for input (other
   * than `delivered`, the signal the message just gave): status updates when its state moves,
   * the model's text as it streams (chunks of the `answer` artifact), and at the end the run's
   * output as artifacts before the last status.
   */
  private async *stream(
    doc: RunDocument,
    call: A2ACall,
    delivered?: string,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    yield { payload: { $case: 'task', value: taskOf(doc) } };
    let state = taskStateOf(doc);
    if (endsWaiting(doc, delivered)) return;
    let streamed = false;
    for await (const update of this.follow(doc.runId, call.closed)) {
      if ('text' in update) {
        yield artifactUpdate(doc, answerChunk(update.text), { append: streamed, lastChunk: false });
        streamed = true;
        continue;
      }
      const next = taskStateOf(update.doc);
      const ends = endsWaiting(update.doc, delivered);
      if (isFinalState(next)) {
        for (const artifact of artifactsOf(update.doc)) {
          yield artifactUpdate(update.doc, artifact, { append: false, lastChunk: true });
        }
      }
      if (next === state && !ends) continue;
      state = next;
      yield statusUpdate(update.doc);
      if (ends) return;
    }
  }

  /**
   * Follows the run's event stream from its start: streamed text as it comes, and the document
   * whenever an event may have moved its state; ends once the run has settled, the client went
   * away, or `deadline` (epoch ms) passed.
   */
  private async *follow(runId: string, closed: AbortSignal, deadline?: number): AsyncGenerator<RunUpdate> {
    const feed = this.deps.hub.follow(runId, 0);
    const stop = (): void => feed.close();
    closed.addEventListener('abort', stop, { once: true });
    try {
      for (;;) {
        const left =
          deadline === undefined ? FOLLOW_SLICE_MS : Math.min(FOLLOW_SLICE_MS, deadline - Date.now());
        if (left <= 0 || feed.closed) return;
        const events = await feed.next(left);
        let moved = false;
        for (const e of events) {
          if (e.type === 'assistant.delta') {
            const text = (e.data as { text?: unknown } | undefined)?.text;
            if (typeof text === 'string' && text.length > 0) yield { text };
          } else if (STATE_EVENTS.has(e.type)) moved = true;
        }
        if (!moved) continue;
        const doc = await this.deps.runs.get(runId);
        if (!doc) return;
        yield { doc };
        if (doc.finishedAt !== null) return;
      }
    } finally {
      closed.removeEventListener('abort', stop);
      feed.close();
    }
  }

  /**
   * Runs a method, answering Tetraloop's refusals as A2A errors that name the field; anything
   * unforeseen is logged and answered as an internal error without its message.
   */
  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw this.asA2AError(err);
    }
  }

  private async *guardStream<T>(
    stream: AsyncGenerator<T, void, undefined>,
  ): AsyncGenerator<T, void, undefined> {
    try {
      yield* stream;
    } catch (err) {
      throw this.asA2AError(err);
    }
  }

  private asA2AError(err: unknown): unknown {
    if (err instanceof A2AError) return err;
    if (err instanceof MessageRefusal) {
      return new RequestMalformedError({ message: err.message, metadata: { field: err.path } });
    }
    if (err instanceof RequestRefusedError) {
      const issue = err.issues[0];
      return new RequestMalformedError({
        message: err.message,
        metadata: { field: issue?.path ?? '' },
      });
    }
    if (err instanceof HttpError && err.status < 500) {
      if (err.status === 404) return new TaskNotFoundError(err.message);
      const issue = err.issues?.[0];
      return new RequestMalformedError({
        message: `${err.code}: ${err.message}`,
        metadata: { code: err.code, ...(issue ? { field: issue.path } : {}) },
      });
    }
    this.deps.logger.error({ err }, 'A2A request failed');
    return new A2AError('internal error');
  }
}
