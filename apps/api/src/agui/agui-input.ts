/**
 * What `POST /v1/agui/:agentId` reads of AG-UI's `RunAgentInput`: the thread (a session), the
 * newest user message, the context and state the client hands the agent, and the answers to a
 * previous run's interrupts. Fields Tetraloop does not read are let through, as AG-UI's own
 * schemas do; the ones it reads are checked, each error naming its field. Pure.
 */
import { untrustedData } from '@tetraloop/core/model';
import { SessionKey } from '@tetraloop/core/sessions';
import { z } from 'zod';
import { STATE_KEY } from './agui-translator.js';

/** Most messages a request may carry (the whole conversation, as AG-UI's clients send it). */
export const AGUI_MAX_MESSAGES = 1000;
/** Most interrupts one request may answer. */
export const AGUI_MAX_RESUME = 20;
/** Most context entries. */
export const AGUI_MAX_CONTEXT = 50;
/** The longest message text a session takes (as `POST /v1/sessions/:sessionKey/messages`). */
const MAX_TEXT = 20_000;

const AguiMessage = z.looseObject({
  /** Also the message's id in its session: the same message sent again is taken once. */
  id: z.string().min(1).max(256),
  role: z.enum(['developer', 'system', 'assistant', 'user', 'tool', 'activity', 'reasoning']),
  /** A string, or content parts of which the `text` ones are read. */
  content: z.unknown().optional(),
});

const AguiResumeEntry = z.looseObject({
  /** The `id` of an interrupt of the previous run's `RUN_FINISHED`. */
  interruptId: z.string().min(1).max(400),
  status: z.enum(['resolved', 'cancelled']),
  /** The answer: `{"approved": true|false}` for a tool approval, `{costUsd}` or `{stop: true}` for a budget. */
  payload: z.unknown().optional(),
});

/** Body of `POST /v1/agui/:agentId`: AG-UI's `RunAgentInput`. */
export const AguiRunInput = z.looseObject({
  /** The session the run belongs to (its key). */
  threadId: SessionKey,
  /** The client's id for this run: the AG-UI events name it. */
  runId: z.string().min(1).max(256),
  protocolVersion: z.string().max(32).optional(),
  /** Any object; Tetraloop shows the run under its `tetraloop` key. */
  state: z.record(z.string(), z.unknown()).nullable().optional(),
  messages: z.array(AguiMessage).max(AGUI_MAX_MESSAGES),
  /** The client's (frontend) tools: not offered to the agent. */
  tools: z.array(z.looseObject({ name: z.string(), description: z.string() })).optional(),
  context: z
    .array(z.looseObject({ description: z.string().max(1000), value: z.string() }))
    .max(AGUI_MAX_CONTEXT)
    .optional(),
  forwardedProps: z.unknown().optional(),
  resume: z.array(AguiResumeEntry).max(AGUI_MAX_RESUME).optional(),
});
export type AguiRunInput = z.infer<typeof AguiRunInput>;

/** One problem with the input, at its path (as `zodToHttp` names them). */
export interface InputIssue {
  readonly path: string;
  readonly message: string;
}

/** The message a run is asked to answer: the last one, a user's, with text. */
export type NewMessage =
  | { readonly ok: true; readonly id: string; readonly text: string }
  | { readonly ok: false; readonly issue: InputIssue };

export function newMessageOf(input: AguiRunInput): NewMessage {
  const index = input.messages.length - 1;
  const last = input.messages[index];
  if (!last || last.role !== 'user') {
    return {
      ok: false,
      issue: {
        path: 'messages',
        message: 'the last message must be the user message to answer (or send resume to answer interrupts)',
      },
    };
  }
  const text = textOf(last.content);
  if (!text || text.length > MAX_TEXT) {
    return {
      ok: false,
      issue: {
        path: `messages.${index}.content`,
        message: text ? `is ${text.length} characters; at most ${MAX_TEXT}` : 'has no text',
      },
    };
  }
  return { ok: true, id: last.id, text };
}

/** A message's text: the string, or its `text` parts joined by newlines. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .flatMap((part: unknown) =>
      typeof part === 'object' &&
      part !== null &&
      (part as { type?: unknown }).type === 'text' &&
      typeof (part as { text?: unknown }).text === 'string'
        ? [(part as { text: string }).text]
        : [],
    )
    .join('\n');
}

/**
 * The client's context and state, as the delimited blocks of outside data a session run is handed
 * (never as the message's text: they are the client's word, not the user's).
 */
export function clientData(input: AguiRunInput): string[] {
  const blocks: string[] = [];
  if (input.context?.length) {
    const context = input.context.map(({ description, value }) => ({ description, value }));
    blocks.push(untrustedData({ source: 'ag-ui', type: 'context' }, context));
  }
  const state = clientStateOf(input);
  if (Object.keys(state).length > 0) blocks.push(untrustedData({ source: 'ag-ui', type: 'state' }, state));
  return blocks;
}

/** The client's own state: what it sent, without the run Tetraloop showed it under `tetraloop`. */
export function clientStateOf(input: AguiRunInput): Record<string, unknown> {
  const { [STATE_KEY]: _shown, ...own } = input.state ?? {};
  return own;
}
