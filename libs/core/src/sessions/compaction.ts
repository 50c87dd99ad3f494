/**
 * Session compaction: when the part of a session's current context that a run would see grows past
 * a token budget, its older turns are folded into one summary (by the model when one is
 * configured, else a deterministic head-and-tail cut) and runs see the summary plus the recent
 * turns. Everything here but `modelSummarizer` is pure; the session service reads and records.
 */
import type { ModelClient } from '../model/model-client.js';
import type { CompactionCovers, HistoryMessage } from '../state/session-store.js';
import { capHeadTail } from '../workspace/workspace.js';

/** Characters counted as one token by the estimate. */
export const CHARS_PER_TOKEN = 4;

/**
 * Estimated tokens of `text`: its length in characters (UTF-16 code units) divided by 4, rounded
 * up. Crude but deterministic, and the same on every process; real tokenizers give about 4
 * characters per token for English text and fewer for other scripts and for code.
 */
export const estimateTokens = (text: string): number => Math.ceil(text.length / CHARS_PER_TOKEN);

/** A message as a run sees it in its history. */
export const messageLine = (m: Pick<HistoryMessage, 'role' | 'text'>): string => `${m.role}: ${m.text}`;

/** Estimated tokens of a history: the summary (if any) and each message line. */
export function historyTokens(summary: string | null, turns: readonly HistoryMessage[]): number {
  let tokens = summary === null ? 0 : estimateTokens(summary);
  for (const m of turns) tokens += estimateTokens(messageLine(m));
  return tokens;
}

export interface CompactionLimits {
  /** Compact when the history's estimate passes this (TETRALOOP_SESSION_COMPACT_TOKENS). */
  readonly tokens: number;
  /** Compact when the lines read since the latest compaction pass this many. */
  readonly lines: number;
}

/** The longest summary, in characters: a quarter of the token budget. */
export const summaryCharsOf = (limits: Pick<CompactionLimits, 'tokens'>): number =>
  Math.floor(limits.tokens / 4) * CHARS_PER_TOKEN;

/** The most of the conversation a summary request carries, in characters: twice the token budget. */
export const summaryInputCharsOf = (limits: Pick<CompactionLimits, 'tokens'>): number =>
  limits.tokens * 2 * CHARS_PER_TOKEN;

/** What a run would see of the current context, before any compaction. */
export interface HistoryState {
  /** The latest compaction's summary, if any. */
  readonly summary: string | null;
  /** The message lines after the latest compaction, oldest first, without the newest one. */
  readonly turns: readonly HistoryMessage[];
  /** The newest message line (the one the run answers), left out of the history. */
  readonly newest: HistoryMessage | undefined;
  /** First transcript index read, and the transcript's length. */
  readonly start: number;
  readonly length: number;
}

export interface CompactionPlan {
  /** The older turns to fold into the summary, oldest first. */
  readonly fold: readonly HistoryMessage[];
  /** The recent turns runs keep seeing as they are. */
  readonly keep: readonly HistoryMessage[];
  /** The last transcript index the new summary stands for: the line before the first one kept. */
  readonly toIndex: number;
  /** The history's estimate before the compaction. */
  readonly tokensBefore: number;
}

/**
 * Whether to compact, and what: nothing while the history's estimate stays within `limits.tokens`
 * and the lines read within `limits.lines`. Otherwise the most recent turns that fit in half the
 * token budget (and lie within the latest half of the line window) are kept, starting at a user
 * message; the older ones are folded. Null when there is nothing to fold.
 */
export function planCompaction(state: HistoryState, limits: CompactionLimits): CompactionPlan | null {
  const tokensBefore = historyTokens(state.summary, state.turns);
  if (tokensBefore <= limits.tokens && state.length - state.start <= limits.lines) return null;
  const oldestKept = state.length - Math.floor(limits.lines / 2);
  let kept = state.turns.length;
  for (let used = 0; kept > 0; kept--) {
    const turn = state.turns[kept - 1]!;
    const cost = estimateTokens(messageLine(turn));
    if (used + cost > limits.tokens / 2 || turn.index < oldestKept) break;
    used += cost;
  }
  // Recent turns start with the user's message, never with a reply whose question was folded.
  while (kept < state.turns.length && state.turns[kept]!.role !== 'user') kept++;
  const fold = state.turns.slice(0, kept);
  const keep = state.turns.slice(kept);
  const last = fold.at(-1);
  if (!last) return null;
  const next = keep[0] ?? state.newest;
  return { fold, keep, toIndex: next ? next.index - 1 : last.index, tokensBefore };
}

/** The covers of a new summary that folds `plan` into the previous one (if any). */
export function coversOf(
  previous: CompactionCovers | undefined,
  contextFrom: number,
  plan: CompactionPlan,
): CompactionCovers {
  return {
    fromIndex: previous?.fromIndex ?? contextFrom,
    toIndex: plan.toIndex,
    messages: (previous?.messages ?? 0) + plan.fold.length,
  };
}

/**
 * The deterministic summary: the previous summary and the folded lines, one after the other, cut to
 * `maxChars` keeping the head and the tail (half each), with a marker where the middle was:
 * `…[N earlier messages, M chars omitted]…` on a line of its own, N counting the folded messages
 * the cut touches (wholly or in part) and M the characters cut.
 */
export function truncatedSummary(
  previous: string | null,
  fold: readonly Pick<HistoryMessage, 'role' | 'text'>[],
  maxChars: number,
): string {
  const parts = [...(previous === null ? [] : [previous]), ...fold.map(messageLine)];
  const text = parts.join('\n');
  if (text.length <= maxChars) return text;
  const marker = (messages: number, chars: number): string =>
    `\n…[${messages} earlier messages, ${chars} chars omitted]…\n`;
  // The longest the marker can be; the real one is no longer.
  const keep = Math.max(0, maxChars - marker(fold.length, text.length).length);
  const head = Math.floor(keep / 2);
  const tail = keep - head;
  const cutFrom = head;
  const cutTo = text.length - tail;
  let touched = 0;
  let at = 0;
  parts.forEach((part, i) => {
    const end = at + part.length;
    const isMessage = previous === null || i > 0;
    if (isMessage && at < cutTo && end > cutFrom) touched++;
    at = end + 1;
  });
  return text.slice(0, cutFrom) + marker(touched, cutTo - cutFrom) + text.slice(cutTo);
}

/** Tells the summarising model what it is for; the text to summarise is the user message. */
export const SUMMARY_SYSTEM = `You condense the earlier part of a conversation between a user and an AI agent so that the agent can carry on without it.
Keep what the agent needs later: facts, names, numbers, decisions, what the user asked for and what is still open. Leave out pleasantries.
Answer with the summary only.`;

/**
 * The user message of a summary request: the previous summary and the turns to fold in, the turns
 * cut to `maxInputChars` (head and tail kept), so that one huge message cannot make the request
 * outgrow the model.
 */
export function summaryPrompt(
  previous: string | null,
  fold: readonly Pick<HistoryMessage, 'role' | 'text'>[],
  limits: { maxChars: number; maxInputChars: number },
): string {
  return [
    `Summarise the conversation below in at most ${limits.maxChars} characters.`,
    ...(previous === null ? [] : ['', 'Summary of what came before it:', previous]),
    '',
    'Conversation:',
    capHeadTail(fold.map(messageLine).join('\n'), limits.maxInputChars),
  ].join('\n');
}

/** A model's summary, trimmed and cut to `maxChars` (head and tail kept). */
export const cappedSummary = (text: string, maxChars: number): string => capHeadTail(text.trim(), maxChars);

/**
 * The parts of a run's runtime overrides that carry its history: the summary of the earlier
 * conversation (after a compaction) and the recent messages, oldest first.
 */
export function historyParts(summary: string | null, turns: readonly HistoryMessage[]): string[] {
  return [
    ...(summary === null ? [] : [`Summary of the earlier conversation: ${summary}`]),
    ...(turns.length ? [`Conversation so far:\n${turns.map(messageLine).join('\n')}`] : []),
  ];
}

/** Asks for a summary of `text`; throws when there is none to be had. */
export type Summarizer = (text: string, signal: AbortSignal) => Promise<string>;

/** Summaries by the configured model (TETRALOOP_MODEL), one call, no retries. */
export function modelSummarizer(model: ModelClient): Summarizer {
  return async (text, signal) => {
    const result = await model.chat({
      messages: [
        { role: 'system', content: SUMMARY_SYSTEM },
        { role: 'user', content: text },
      ],
      signal,
    });
    return result.text;
  };
}
