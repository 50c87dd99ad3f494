import { describe, expect, it } from 'vitest';
import type { HistoryMessage } from '../state/session-store.js';
import {
  coversOf,
  estimateTokens,
  historyParts,
  historyTokens,
  planCompaction,
  summaryCharsOf,
  summaryInputCharsOf,
  summaryPrompt,
  truncatedSummary,
  type HistoryState,
} from './compaction.js';

/** Alternating user and assistant messages of `chars` characters each, at transcript indexes 0, 2, 4…. */
function turns(count: number, chars: number, from = 0): HistoryMessage[] {
  return Array.from({ length: count }, (_, i) => ({
    index: from + i * 2,
    role: i % 2 === 0 ? 'user' : 'assistant',
    text: String(i % 10).repeat(chars),
  }));
}

function state(all: HistoryMessage[], summary: string | null = null, start = 0): HistoryState {
  return {
    summary,
    turns: all.slice(0, -1),
    newest: all.at(-1),
    start,
    length: (all.at(-1)?.index ?? start) + 1,
  };
}

describe('estimateTokens', () => {
  it('counts characters / 4, rounded up, per line of the history', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('abcd')).toBe(1);
    expect(estimateTokens('abcde')).toBe(2);
    // "user: xxxx" (10) → 3, "assistant: yy" (13) → 4, the summary (8) → 2.
    const history = [
      { index: 0, role: 'user', text: 'xxxx' },
      { index: 1, role: 'assistant', text: 'yy' },
    ];
    expect(historyTokens(null, history)).toBe(7);
    expect(historyTokens('12345678', history)).toBe(9);
  });
});

describe('planCompaction', () => {
  const limits = { tokens: 400, lines: 1000 };

  it('does nothing while the history stays within the budget', () => {
    // Each line: "user: " + 194 = 200 chars = 50 tokens; 8 lines before the newest = 400.
    const all = turns(9, 194).map((m) => ({ ...m, role: 'user' }));
    expect(historyTokens(null, all.slice(0, -1))).toBe(400);
    expect(planCompaction(state(all), limits)).toBeNull();
  });

  it('keeps the recent turns within half the budget, from a user message, and folds the rest', () => {
    // User lines 206 chars (52 tokens), assistant lines 211 (53): 10 turns before the newest = 525.
    const all = turns(11, 200);
    const plan = planCompaction(state(all), limits)!;
    expect(plan.tokensBefore).toBe(525);
    // From the end: 53 + 52 + 53 = 158, + 52 = 210 > 200; the kept part would start with a reply: drop it.
    expect(plan.keep.map((m) => m.index)).toEqual([16, 18]);
    expect(plan.keep[0]!.role).toBe('user');
    expect(plan.fold.map((m) => m.index)).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
    // The summary stands for everything before the first kept line.
    expect(plan.toIndex).toBe(15);
  });

  it('counts the previous summary, and folds everything when no recent turn fits', () => {
    const all = turns(3, 1000);
    const plan = planCompaction(state(all, 'earlier'), limits)!;
    expect(plan.keep).toEqual([]);
    expect(plan.fold).toHaveLength(2);
    // Up to the line before the newest message.
    expect(plan.toIndex).toBe(3);
    expect(plan.tokensBefore).toBe(historyTokens('earlier', all.slice(0, -1)));
  });

  it('also compacts when the lines read pass the line window, keeping only the latest half', () => {
    // Short messages, far apart: few tokens, but 1,200 lines since the start.
    const all = turns(7, 4).map((m, i) => ({ ...m, index: i * 200 }));
    const read = { ...state(all), length: 1201 };
    expect(historyTokens(null, read.turns)).toBeLessThan(100);
    const plan = planCompaction(read, limits)!;
    // The latest half of the window starts at line 701: turns at 800 and 1000 are kept.
    expect(plan.keep.map((m) => m.index)).toEqual([800, 1000]);
    expect(plan.toIndex).toBe(799);
    expect(planCompaction({ ...read, length: 1000 }, limits)).toBeNull();
  });

  it('has nothing to fold when the history is only the newest message', () => {
    expect(planCompaction(state(turns(1, 5000)), limits)).toBeNull();
  });
});

describe('coversOf', () => {
  it('rolls a previous summary into the new one: from the context start, messages added up', () => {
    const plan = planCompaction(state(turns(11, 200, 20)), { tokens: 400, lines: 1000 })!;
    expect(coversOf(undefined, 19, plan)).toEqual({ fromIndex: 19, toIndex: 35, messages: 8 });
    expect(coversOf({ fromIndex: 3, toIndex: 18, messages: 5 }, 19, plan)).toEqual({
      fromIndex: 3,
      toIndex: 35,
      messages: 13,
    });
  });
});

describe('truncatedSummary', () => {
  it('keeps everything when it fits', () => {
    const fold = [
      { role: 'user', text: 'hi' },
      { role: 'assistant', text: 'hello' },
    ];
    expect(truncatedSummary(null, fold, 100)).toBe('user: hi\nassistant: hello');
    expect(truncatedSummary('before', fold, 100)).toBe('before\nuser: hi\nassistant: hello');
  });

  it('keeps the head and the tail within the limit, with a marker counting what the cut touched', () => {
    const fold = turns(20, 100);
    const text = truncatedSummary('PREVIOUS', fold, 400);
    expect(text.length).toBeLessThanOrEqual(400);
    expect(text.startsWith('PREVIOUS\nuser: 0000')).toBe(true);
    expect(text.endsWith(`assistant: ${'9'.repeat(100)}`)).toBe(true);
    const marker = /\n…\[(\d+) earlier messages, (\d+) chars omitted\]…\n/.exec(text)!;
    expect(marker).not.toBeNull();
    const full = ['PREVIOUS', ...fold.map((m) => `${m.role}: ${m.text}`)].join('\n');
    expect(Number(marker[2])).toBe(full.length - (text.length - marker[0].length));
    // About 2,100 characters cut from 20 lines of 106–111 characters: 18 or 19 of them touched.
    expect(Number(marker[1])).toBeGreaterThanOrEqual(18);
    expect(Number(marker[1])).toBeLessThanOrEqual(20);
  });

  it('does not count the previous summary as a message', () => {
    const text = truncatedSummary('P'.repeat(1000), [{ role: 'user', text: 'last' }], 200);
    expect(text).toMatch(/…\[0 earlier messages, \d+ chars omitted\]…\nPPP/);
    expect(text.endsWith('\nuser: last')).toBe(true);
  });
});

describe('what a run sees', () => {
  it('is the summary, then the recent messages', () => {
    const recent = [
      { index: 5, role: 'user', text: 'q' },
      { index: 6, role: 'assistant', text: 'a' },
    ];
    expect(historyParts('S', recent)).toEqual([
      'Summary of the earlier conversation: S',
      'Conversation so far:\nuser: q\nassistant: a',
    ]);
    expect(historyParts(null, recent)).toEqual(['Conversation so far:\nuser: q\nassistant: a']);
    expect(historyParts('S', [])).toEqual(['Summary of the earlier conversation: S']);
    expect(historyParts(null, [])).toEqual([]);
  });

  it('asks the model for a summary of the previous summary and the folded turns, within the cap', () => {
    const maxChars = summaryCharsOf({ tokens: 8000 });
    expect(maxChars).toBe(8000);
    const maxInputChars = summaryInputCharsOf({ tokens: 8000 });
    expect(maxInputChars).toBe(64_000);
    const prompt = summaryPrompt('OLD', [{ role: 'user', text: 'x' }], { maxChars, maxInputChars });
    expect(prompt).toBe(
      'Summarise the conversation below in at most 8000 characters.\n\nSummary of what came before it:\nOLD\n\nConversation:\nuser: x',
    );
    // One huge message is cut, head and tail kept.
    const huge = summaryPrompt(null, [{ role: 'user', text: 'y'.repeat(100_000) }], {
      maxChars,
      maxInputChars,
    });
    expect(
      huge.startsWith(
        'Summarise the conversation below in at most 8000 characters.\n\nConversation:\nuser: yyy',
      ),
    ).toBe(true);
    expect(huge).toMatch(/…\[\d+ chars omitted\]…/);
    expect(huge.length).toBeLessThan(64_100);
  });
});
