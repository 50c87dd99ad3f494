import { describe, expect, it } from 'vitest';
import type { StoredItem } from '@tetraloop/core/state';
import {
  historyOf,
  inputText,
  laneModeOf,
  namespacesOf,
  runStatusOf,
  searchItems,
  transcriptMessages,
  valuesOf,
} from './mapping.js';

describe('inputText', () => {
  it('takes the last human message, as a string or text parts', () => {
    expect(
      inputText({
        messages: [
          { role: 'user', content: 'a' },
          { type: 'ai', content: 'b' },
        ],
      }),
    ).toEqual({
      text: 'a',
    });
    expect(
      inputText({
        messages: [{ type: 'human', content: [{ type: 'text', text: 'x' }, { type: 'image_url' }] }],
      }),
    ).toEqual({ text: 'x' });
  });

  it('names what is missing', () => {
    expect(inputText(undefined)).toEqual({ issue: 'give the run its message as input.messages' });
    expect(inputText({ messages: [{ role: 'assistant', content: 'b' }] })).toEqual({
      issue: 'input.messages has no human (or user) message',
    });
    expect(inputText({ messages: [{ role: 'user', content: ' ' }] })).toEqual({
      issue: 'input.messages[0].content has no text',
    });
  });
});

describe('threads from transcripts', () => {
  const lines = [
    { type: 'message', role: 'user', text: 'old', receivedAt: 't0' },
    { type: 'command', command: 'reset' },
    { type: 'message', role: 'user', text: 'q1', receivedAt: 't1' },
    { type: 'tool_call', name: 'http' },
    { type: 'message', role: 'assistant', text: 'a1', runId: 'r1', at: 't2' },
    { type: 'message', role: 'user', text: 'q2', receivedAt: 't3' },
  ];

  it('keeps the current context’s messages, an answer named by its run', () => {
    expect(transcriptMessages(lines, 10).map((m) => [m.message.id, m.message.content])).toEqual([
      ['line-12', 'q1'],
      ['run-r1', 'a1'],
      ['line-15', 'q2'],
    ]);
  });

  it('adds the answer of a settled run not written yet, once', () => {
    const messages = transcriptMessages(lines, 0);
    expect(valuesOf(messages, { runId: 'r2', text: 'a2' }).messages.at(-1)).toEqual({
      type: 'ai',
      id: 'run-r2',
      content: 'a2',
    });
    expect(valuesOf(messages, { runId: 'r1', text: 'a1' }).messages).toHaveLength(3);
  });

  it('has a state after each answer and the current one, newest first', () => {
    const messages = transcriptMessages(lines, 0);
    const history = historyOf('t', messages, valuesOf(messages), 10);
    expect(history.map((h) => h.values.messages.length)).toEqual([3, 2]);
    expect(history[0]!.parent_checkpoint?.checkpoint_id).toBe(history[1]!.checkpoint.checkpoint_id);
    expect(historyOf('t', messages, valuesOf(messages), 1)).toHaveLength(1);
  });
});

describe('statuses and strategies', () => {
  it('shows a cancelled run as interrupted', () => {
    expect(runStatusOf('cancelled')).toBe('interrupted');
    expect(runStatusOf('queued')).toBe('pending');
  });

  it('places enqueue and reject as followup, interrupt and rollback as interrupt', () => {
    expect(['enqueue', 'reject', 'interrupt', 'rollback'].map((s) => laneModeOf(s as never))).toEqual([
      'followup',
      'followup',
      'interrupt',
      'interrupt',
    ]);
  });
});

describe('the store’s search', () => {
  const item = (
    namespace: string[],
    key: string,
    value: Record<string, unknown>,
    at: string,
  ): StoredItem => ({
    namespace,
    key,
    value,
    created_at: at,
    updated_at: at,
  });
  const items = [
    item(['u', 'a'], 'k1', { theme: 'dark' }, '2026-01-01'),
    item(['u', 'a'], 'k2', { theme: 'light' }, '2026-01-03'),
    item(['u', 'b', 'deep'], 'k3', { theme: 'dark' }, '2026-01-02'),
    item(['v'], 'k4', {}, '2026-01-04'),
  ];

  it('matches a prefix and equal fields, newest first, a page at a time', () => {
    const keys = (found: StoredItem[]) => found.map((i) => i.key);
    expect(keys(searchItems(items, { prefix: ['u'], limit: 10, offset: 0 }))).toEqual(['k2', 'k3', 'k1']);
    expect(
      keys(searchItems(items, { prefix: ['u'], filter: { theme: 'dark' }, limit: 10, offset: 0 })),
    ).toEqual(['k3', 'k1']);
    expect(keys(searchItems(items, { prefix: [], limit: 1, offset: 1 }))).toEqual(['k2']);
  });

  it('lists distinct namespaces, cut to a depth', () => {
    expect(namespacesOf(items, { limit: 10, offset: 0 })).toEqual([['u', 'a'], ['u', 'b', 'deep'], ['v']]);
    expect(namespacesOf(items, { prefix: ['u'], maxDepth: 2, limit: 10, offset: 0 })).toEqual([
      ['u', 'a'],
      ['u', 'b'],
    ]);
    expect(namespacesOf(items, { suffix: ['deep'], limit: 10, offset: 0 })).toEqual([['u', 'b', 'deep']]);
  });
});
