/**
 * How a Tetraloop run reads as an A2A task, and an A2A message as a session message. Pure: the
 * run document in, the SDK's task, status and artifact shapes out.
 *
 *   task id     ↔ run id
 *   contextId   ↔ the session the run belongs to (the run id for a run outside sessions)
 *   task state  ↔ run status; a running run with a node waiting for a signal or an approval is
 *                 `input-required`
 *   artifacts   ↔ the run's output: `answer` (the reply's text) and `output` (the sinks' outputs)
 */
import { randomUUID } from 'node:crypto';
import {
  Role,
  TaskState,
  type Artifact,
  type Message,
  type Part,
  type StreamResponse,
  type Task,
  type TaskStatus,
} from '@a2a-js/sdk';
import { unscopeName, type RunDocument, type RunStatus } from '@tetraloop/core/domain';
import { replyOf } from '@tetraloop/core/sessions';

/** The artifact ids a task's output comes as. */
export const ANSWER_ARTIFACT = 'answer';
export const OUTPUT_ARTIFACT = 'output';

/** A node of the run waiting for a signal (a wait node's, an approval's, a budget decision's). */
export interface AwaitedSignal {
  readonly nodeId: string;
  readonly signal: string;
  readonly until?: string;
}

const STATE_OF_STATUS: Record<RunStatus, TaskState> = {
  queued: TaskState.TASK_STATE_SUBMITTED,
  running: TaskState.TASK_STATE_WORKING,
  succeeded: TaskState.TASK_STATE_COMPLETED,
  failed: TaskState.TASK_STATE_FAILED,
  timed_out: TaskState.TASK_STATE_FAILED,
  cancelled: TaskState.TASK_STATE_CANCELED,
};

/** The states after which a task changes no more. */
export const isFinalState = (state: TaskState): boolean =>
  state === TaskState.TASK_STATE_COMPLETED ||
  state === TaskState.TASK_STATE_FAILED ||
  state === TaskState.TASK_STATE_CANCELED ||
  state === TaskState.TASK_STATE_REJECTED;

/** The signals the run's nodes wait for now; empty once it settled. */
export function awaitedSignals(doc: RunDocument): AwaitedSignal[] {
  if (doc.finishedAt !== null) return [];
  return Object.entries(doc.nodes).flatMap(([nodeId, view]) =>
    view.status === 'waiting' && 'signal' in view && typeof view.signal === 'string'
      ? [{ nodeId, signal: view.signal, ...(view.until ? { until: view.until } : {}) }]
      : [],
  );
}

export function taskStateOf(doc: RunDocument): TaskState {
  if (doc.status === 'running' && awaitedSignals(doc).length > 0) return TaskState.TASK_STATE_INPUT_REQUIRED;
  // An outcome decided but not settled yet has no output: the task completes (or fails) once it
  // has. A cancel is the caller's own decision: it shows at once.
  if (
    doc.finishedAt === null &&
    (doc.status === 'succeeded' || doc.status === 'failed' || doc.status === 'timed_out')
  )
    return TaskState.TASK_STATE_WORKING;
  return STATE_OF_STATUS[doc.status];
}

/**
 * Whether a blocking send or a stream ends at this document: the task ended, or it asks for input
 * other than the signal the message just delivered (the run may not have taken it up yet).
 */
export function endsWaiting(doc: RunDocument, delivered?: string): boolean {
  const state = taskStateOf(doc);
  if (isFinalState(state)) return true;
  return (
    state === TaskState.TASK_STATE_INPUT_REQUIRED && !awaitedSignals(doc).some((a) => a.signal === delivered)
  );
}

/** The A2A context of a run: its session as the client named it, else the run itself. */
export const contextIdOf = (doc: RunDocument): string =>
  doc.sessionKey ? unscopeName(doc.sessionKey).name : doc.runId;

export const textPart = (text: string): Part => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

export const dataPart = (value: unknown): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

/** A message from the agent in a context; `taskId` empty for one outside any task. */
export function agentMessageIn(contextId: string, taskId: string, parts: Part[]): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** A message from the agent about a task. */
const agentMessage = (doc: RunDocument, parts: Part[]): Message =>
  agentMessageIn(contextIdOf(doc), doc.runId, parts);

/** What the status says beside its state: what input is awaited, or why the run failed. */
function statusMessage(doc: RunDocument, state: TaskState): Message | undefined {
  if (state === TaskState.TASK_STATE_INPUT_REQUIRED) {
    const awaited = awaitedSignals(doc);
    const names = awaited.map((a) => a.signal).join(', ');
    return agentMessage(doc, [
      textPart(`the run waits for the signal ${names}: send a message with this taskId to deliver it`),
      dataPart({ awaiting: awaited }),
    ]);
  }
  if (doc.error && (state === TaskState.TASK_STATE_FAILED || state === TaskState.TASK_STATE_CANCELED)) {
    return agentMessage(doc, [textPart(`${doc.error.code}: ${doc.error.message}`)]);
  }
  return undefined;
}

export function taskStatusOf(doc: RunDocument): TaskStatus {
  const state = taskStateOf(doc);
  return {
    state,
    message: statusMessage(doc, state),
    timestamp: doc.finishedAt ?? doc.startedAt ?? doc.createdAt,
  };
}

const artifact = (artifactId: string, parts: Part[]): Artifact => ({
  artifactId,
  name: artifactId,
  description: '',
  parts,
  metadata: undefined,
  extensions: [],
});

/** The artifact streamed text arrives in, before the run's answer replaces it. */
export const answerChunk = (text: string): Artifact => artifact(ANSWER_ARTIFACT, [textPart(text)]);

/** The run's output once it succeeded: its reply's text, and the sinks' outputs as data. */
export function artifactsOf(doc: RunDocument): Artifact[] {
  if (doc.status !== 'succeeded') return [];
  const text = replyOf(doc, []).text;
  return [
    ...(text === null ? [] : [artifact(ANSWER_ARTIFACT, [textPart(text)])]),
    artifact(OUTPUT_ARTIFACT, [dataPart(doc.output ?? {})]),
  ];
}

/** A stream's event: an artifact of the task, whole or a chunk of it. */
export const artifactUpdate = (
  doc: RunDocument,
  artifact: Artifact,
  chunk: { readonly append: boolean; readonly lastChunk: boolean },
): StreamResponse => ({
  payload: {
    $case: 'artifactUpdate',
    value: { taskId: doc.runId, contextId: contextIdOf(doc), artifact, ...chunk, metadata: undefined },
  },
});

/** A stream's event: the task's status now. */
export const statusUpdate = (doc: RunDocument): StreamResponse => ({
  payload: {
    $case: 'statusUpdate',
    value: { taskId: doc.runId, contextId: contextIdOf(doc), status: taskStatusOf(doc), metadata: undefined },
  },
});

export function taskOf(doc: RunDocument): Task {
  return {
    id: doc.runId,
    contextId: contextIdOf(doc),
    status: taskStatusOf(doc),
    artifacts: artifactsOf(doc),
    // The conversation is the session's transcript (GET /v1/sessions/:key/transcript).
    history: [],
    metadata: { agentId: doc.agentId, runStatus: doc.status },
  };
}

/** Why a message cannot be taken in, at a field of the request. */
export class MessageRefusal extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
    this.name = 'MessageRefusal';
  }
}

/**
 * A message's parts as the text of a session message: text parts as they are, data parts as
 * JSON, one after the other. Files (raw bytes, URLs) are refused.
 */
export function messageText(message: Message): string {
  const texts = message.parts.map((part, i) => {
    const content = part.content;
    if (content?.$case === 'text') return content.value;
    if (content?.$case === 'data') return JSON.stringify(content.value);
    throw new MessageRefusal(
      `message.parts[${i}]`,
      'only text and data parts are taken (files are not supported)',
    );
  });
  const text = texts.filter((t) => t.length > 0).join('\n\n');
  if (text.length === 0) throw new MessageRefusal('message.parts', 'holds no text');
  return text;
}

/**
 * The payload a message delivers as a signal: its only data part's value, else `{text}` (an
 * approval takes `{"approved": true}`, a budget decision its own shape: send those as data).
 */
export function signalPayloadOf(message: Message): unknown {
  const data = message.parts.filter((p) => p.content?.$case === 'data');
  if (data.length === 1 && data[0]!.content?.$case === 'data') return data[0]!.content.value;
  return { text: messageText(message) };
}
