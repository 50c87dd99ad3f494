/**
 * How LangGraph's concepts map onto Tetraloop's, as pure functions: a run's status, a multitask
 * strategy's lane mode, a run input's text, a transcript's messages, states and history, and the
 * store's search. No Redis, no Express.
 */
import type { RunDocument, RunStatus } from '@tetraloop/core/domain';
import type { LaneMode, StoredItem } from '@tetraloop/core/state';
import type {
  LangGraphMessage,
  LangGraphRun,
  LangGraphRunStatus,
  LangGraphThreadState,
  LangGraphValues,
  MultitaskStrategy,
} from './protocol.js';

/** A run's status as the protocol names it: a cancelled run is `interrupted`. */
export function runStatusOf(status: RunStatus): LangGraphRunStatus {
  switch (status) {
    case 'queued':
      return 'pending';
    case 'running':
      return 'running';
    case 'succeeded':
      return 'success';
    case 'failed':
      return 'error';
    case 'timed_out':
      return 'timeout';
    case 'cancelled':
      return 'interrupted';
  }
}

/**
 * The lane mode a multitask strategy places its message with. `reject` is followup once the
 * thread is seen idle (the handler refuses a busy one); `rollback` interrupts like `interrupt`:
 * the interrupted run is cancelled, and its record and transcript lines stay.
 */
export function laneModeOf(strategy: MultitaskStrategy): LaneMode {
  switch (strategy) {
    case 'reject':
    case 'enqueue':
      return 'followup';
    case 'interrupt':
    case 'rollback':
      return 'interrupt';
  }
}

/** Text of a message's content: a string, or the text parts of a list. */
function contentText(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const parts = content
    .map((p) => (p as { type?: unknown; text?: unknown } | null) ?? {})
    .filter((p) => p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text as string);
  return parts.length > 0 ? parts.join('') : undefined;
}

const HUMAN = new Set(['human', 'user']);

/**
 * The text a run's `input` asks: its last human message (`{messages: [{role|type, content}]}`),
 * or an error naming what is missing.
 */
export function inputText(input: unknown): { text: string } | { issue: string } {
  const messages = (input as { messages?: unknown } | null | undefined)?.messages;
  if (!Array.isArray(messages)) return { issue: 'give the run its message as input.messages' };
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = (messages[i] as { role?: unknown; type?: unknown; content?: unknown } | null) ?? {};
    const role = typeof m.role === 'string' ? m.role : m.type;
    if (typeof role !== 'string' || !HUMAN.has(role)) continue;
    const text = contentText(m.content);
    if (text === undefined || text.trim() === '')
      return { issue: `input.messages[${i}].content has no text` };
    return { text };
  }
  return { issue: 'input.messages has no human (or user) message' };
}

/** A transcript line as sessions write them (see sessions/session-service.ts). */
interface TranscriptLine {
  readonly type?: string;
  readonly role?: string;
  readonly text?: string;
  readonly runId?: string;
  readonly command?: string;
  readonly at?: string;
  readonly receivedAt?: string;
}

/** The id of the answer a run gives in a thread's state (and of its streamed message). */
export const aiMessageId = (runId: string): string => `run-${runId}`;

/** One conversation turn of a transcript: the message, its line number, and when it was written. */
export interface TranscriptMessage {
  readonly message: LangGraphMessage;
  readonly line: number;
  readonly at: string | null;
}

/**
 * The messages of a transcript's current context (after its last `/new` or `/reset`), oldest
 * first; `from` is the number of `lines[0]`.
 */
export function transcriptMessages(lines: readonly unknown[], from: number): TranscriptMessage[] {
  const out: TranscriptMessage[] = [];
  lines.forEach((raw, i) => {
    const line = (raw ?? {}) as TranscriptLine;
    if (line.type === 'command' && (line.command === 'new' || line.command === 'reset')) {
      out.length = 0;
      return;
    }
    if (line.type !== 'message' || typeof line.text !== 'string') return;
    const human = line.role === 'user';
    out.push({
      message: {
        type: human ? 'human' : 'ai',
        id: !human && line.runId ? aiMessageId(line.runId) : `line-${from + i}`,
        content: line.text,
      },
      line: from + i,
      at: line.at ?? line.receivedAt ?? null,
    });
  });
  return out;
}

/** A thread's values: its messages, with the answer of a run that settled but is not written yet. */
export function valuesOf(
  messages: readonly TranscriptMessage[],
  pending?: { runId: string; text: string },
): LangGraphValues {
  const shown = messages.map((m) => m.message);
  if (pending && !shown.some((m) => m.id === aiMessageId(pending.runId))) {
    shown.push({ type: 'ai', id: aiMessageId(pending.runId), content: pending.text });
  }
  return { messages: shown };
}

const checkpointOf = (threadId: string, id: string) => ({
  thread_id: threadId,
  checkpoint_ns: '',
  checkpoint_id: id,
  checkpoint_map: null,
});

/**
 * A thread's history, newest first: one state after each of its answers (and the current one when
 * messages came after the last answer). A checkpoint is named by its last line (`line-<n>`).
 */
export function historyOf(
  threadId: string,
  messages: readonly TranscriptMessage[],
  current: LangGraphValues,
  limit: number,
): LangGraphThreadState[] {
  const ends: number[] = [];
  messages.forEach((m, i) => {
    if (m.message.type === 'ai') ends.push(i);
  });
  const states: LangGraphThreadState[] = ends.map((end, k) => ({
    values: { messages: messages.slice(0, end + 1).map((m) => m.message) },
    next: [],
    checkpoint: checkpointOf(threadId, `line-${messages[end]!.line}`),
    metadata: { source: 'loop', step: k },
    created_at: messages[end]!.at,
    parent_checkpoint: k === 0 ? null : checkpointOf(threadId, `line-${messages[ends[k - 1]!]!.line}`),
    tasks: [],
  }));
  const last = states.at(-1);
  if (current.messages.length > (last?.values.messages.length ?? 0)) {
    states.push(stateOf(threadId, current, messages.at(-1)?.at ?? null, last?.checkpoint.checkpoint_id));
  }
  return states.reverse().slice(0, limit);
}

/** The current state of a thread. */
export function stateOf(
  threadId: string,
  values: LangGraphValues,
  at: string | null,
  parent?: string,
): LangGraphThreadState {
  const lastId = values.messages.at(-1)?.id ?? 'empty';
  return {
    values,
    next: [],
    checkpoint: checkpointOf(threadId, lastId),
    metadata: { source: 'loop' },
    created_at: at,
    parent_checkpoint: parent === undefined ? null : checkpointOf(threadId, parent),
    tasks: [],
  };
}

/** A run document as the protocol's run. */
export function runOf(
  doc: RunDocument,
  threadId: string | null,
  strategy: MultitaskStrategy | null,
): LangGraphRun {
  return {
    run_id: doc.runId,
    thread_id: threadId,
    assistant_id: doc.agentId,
    created_at: doc.createdAt,
    updated_at: doc.finishedAt ?? doc.startedAt ?? doc.createdAt,
    status: runStatusOf(doc.status),
    metadata: doc.metadata ?? {},
    multitask_strategy: strategy,
  };
}

const startsWith = (labels: readonly string[], prefix: readonly string[]): boolean =>
  prefix.every((label, i) => labels[i] === label);

const endsWith = (labels: readonly string[], suffix: readonly string[]): boolean =>
  suffix.every((label, i) => labels[labels.length - suffix.length + i] === label);

/** Items under a namespace prefix whose values equal `filter`'s fields, newest first, a page of them. */
export function searchItems(
  items: readonly StoredItem[],
  query: {
    prefix: readonly string[];
    filter?: Record<string, unknown> | null;
    limit: number;
    offset: number;
  },
): StoredItem[] {
  const filter = Object.entries(query.filter ?? {});
  return items
    .filter((item) => startsWith(item.namespace, query.prefix))
    .filter((item) =>
      filter.every(([field, want]) => JSON.stringify(item.value[field]) === JSON.stringify(want)),
    )
    .sort((a, b) => b.updated_at.localeCompare(a.updated_at) || a.key.localeCompare(b.key))
    .slice(query.offset, query.offset + query.limit);
}

/** The distinct namespaces of the items (cut to `maxDepth` labels), sorted, a page of them. */
export function namespacesOf(
  items: readonly StoredItem[],
  query: {
    prefix?: readonly string[] | null;
    suffix?: readonly string[] | null;
    maxDepth?: number | null;
    limit: number;
    offset: number;
  },
): string[][] {
  const seen = new Map<string, string[]>();
  for (const { namespace } of items) {
    if (query.prefix && !startsWith(namespace, query.prefix)) continue;
    if (query.suffix && !endsWith(namespace, query.suffix)) continue;
    const cut = query.maxDepth ? namespace.slice(0, query.maxDepth) : namespace;
    seen.set(JSON.stringify(cut), cut);
  }
  return [...seen.values()]
    .sort((a, b) => a.join('\u0000').localeCompare(b.join('\u0000')))
    .slice(query.offset, query.offset + query.limit);
}
