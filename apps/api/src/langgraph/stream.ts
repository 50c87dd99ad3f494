/**
 * A run's events as LangGraph stream parts, for the stream modes a client asked for: `values` (the
 * state at the start and the end), `updates` (each node's output as it succeeds), `messages` (the
 * model's token deltas as `messages/partial`, the whole message growing; `messages/complete` when
 * its node ends), `messages-tuple` (`messages`: each delta with its metadata) and `events` (every
 * run event as a LangChain-style `on_*` event). Pure: the caller writes the parts.
 */
import type { RunEvent } from '@tetraloop/core/domain';
import { aiMessageId } from './mapping.js';
import type { LangGraphMessage, StreamMode } from './protocol.js';

/** One server-sent event of a LangGraph stream. */
export interface StreamPart {
  readonly event: string;
  readonly data: unknown;
}

/** The modes of a request; `values` when it names none (as LangGraph does). */
export function modesOf(requested: StreamMode | StreamMode[] | null | undefined): ReadonlySet<StreamMode> {
  if (requested === null || requested === undefined) return new Set(['values']);
  return new Set(Array.isArray(requested) ? requested : [requested]);
}

/** The LangChain callback event a run event reads as (`events` mode). */
function callbackEventOf(type: string): string {
  switch (type) {
    case 'assistant.delta':
      return 'on_chat_model_stream';
    case 'node.started':
    case 'run.started':
      return 'on_chain_start';
    case 'node.succeeded':
    case 'node.failed':
    case 'run.finished':
      return 'on_chain_end';
    case 'tool.start':
      return 'on_tool_start';
    case 'tool.result':
      return 'on_tool_end';
    default:
      return 'on_custom_event';
  }
}

export class StreamTranslator {
  /** Text streamed so far per node, and whether its metadata part was sent. */
  private readonly streamed = new Map<string, string>();

  constructor(
    private readonly modes: ReadonlySet<StreamMode>,
    private readonly runId: string,
  ) {}

  /** The id of the message a node's deltas build. */
  private messageId(nodeId: string): string {
    return `${aiMessageId(this.runId)}/${nodeId}`;
  }

  /** The parts a run event gives. */
  partsOf(e: RunEvent): StreamPart[] {
    const parts: StreamPart[] = [];
    const nodeId = e.nodeId ?? '';
    if (this.modes.has('events')) {
      parts.push({
        event: 'events',
        data: {
          event: callbackEventOf(e.type),
          name: e.type === 'assistant.delta' ? 'model' : nodeId || e.type,
          run_id: this.runId,
          tags: [],
          metadata: { langgraph_node: nodeId, tetraloop_event: e.type },
          parent_ids: [],
          data:
            e.type === 'assistant.delta'
              ? { chunk: this.chunkOf(nodeId, (e.data as { text: string }).text) }
              : (e.data ?? {}),
        },
      });
    }
    if (e.type === 'assistant.delta')
      parts.push(...this.deltaParts(nodeId, (e.data as { text: string }).text));
    if (e.type === 'node.succeeded') {
      if (this.modes.has('updates')) {
        parts.push({ event: 'updates', data: { [nodeId]: (e.data as { output?: unknown }).output ?? null } });
      }
      const text = this.streamed.get(nodeId);
      if (text !== undefined && this.modes.has('messages')) {
        parts.push({ event: 'messages/complete', data: [this.messageOf(nodeId, text)] });
      }
    }
    return parts;
  }

  private messageOf(nodeId: string, content: string): LangGraphMessage {
    return { type: 'ai', id: this.messageId(nodeId), content };
  }

  private chunkOf(nodeId: string, text: string): { type: 'AIMessageChunk'; id: string; content: string } {
    return { type: 'AIMessageChunk', id: this.messageId(nodeId), content: text };
  }

  private deltaParts(nodeId: string, text: string): StreamPart[] {
    const parts: StreamPart[] = [];
    const before = this.streamed.get(nodeId);
    const metadata = { langgraph_node: nodeId, run_id: this.runId, tags: [] };
    if (this.modes.has('messages')) {
      if (before === undefined) {
        parts.push({ event: 'messages/metadata', data: { [this.messageId(nodeId)]: { metadata } } });
      }
      parts.push({ event: 'messages/partial', data: [this.messageOf(nodeId, (before ?? '') + text)] });
    }
    if (this.modes.has('messages-tuple')) {
      parts.push({ event: 'messages', data: [this.chunkOf(nodeId, text), metadata] });
    }
    this.streamed.set(nodeId, (before ?? '') + text);
    return parts;
  }
}

/** One part as server-sent event text (with the run event's seq as its id, when it has one). */
export const sseOf = (part: StreamPart, id?: number): string =>
  `${id === undefined ? '' : `id: ${id}\n`}event: ${part.event}\ndata: ${JSON.stringify(part.data)}\n\n`;
