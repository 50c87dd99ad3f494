/**
 * Session compaction on a real Redis, with the scripted model server behind the real SDK: past
 * TETRALOOP_SESSION_COMPACT_TOKENS (400 here) the older turns of a session are folded into a
 * summary (by the model, or by truncation when there is none or it fails); later runs see the
 * summary and the recent turns, and the transcript keeps every line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { connectRedis } from '@tetraloop/core/runtime';
import { SessionStore } from '@tetraloop/core/state';
import { laneIdle, post, startStack, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
/** How the model answers a summary request; the agent's requests are echoed. */
let summarise: (request: ChatRequest, n: number) => ScriptedReply;
let summaries = 0;

const AGENT_PROMPT = 'You are an agent run by Tetraloop.';
const SUMMARY_PROMPT = 'You condense the earlier part of a conversation';
const systemOf = (r: ChatRequest): string => r.messages[0]?.content ?? '';
const isSummary = (r: ChatRequest): boolean => systemOf(r).startsWith(SUMMARY_PROMPT);
const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
const modelSummary = (_r: ChatRequest, n: number): ScriptedReply => ({ content: `SUMMARY#${n}` });

/** A workspace directory that does not exist: no bootstrap files, short prompts. */
const workspace = new URL('./fixtures/no-workspace', import.meta.url).pathname;

beforeAll(async () => {
  summarise = modelSummary;
  model = await startModelServer({
    script: (r) => (isSummary(r) ? summarise(r, ++summaries) : { content: `echo: ${lastUser(r)}` }),
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_SESSION_COMPACT_TOKENS: '400',
      TETRALOOP_WORKSPACE_DIR: workspace,
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
});

type Line = Record<string, unknown>;
const transcript = async (url: string, key: string): Promise<Line[]> =>
  (await fetch(`${url}/v1/sessions/${key}/transcript`).then((r) => r.text()))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Line)
    .slice(1);
const messages = (lines: Line[]): string[] =>
  lines.filter((l) => l.type === 'message').map((l) => `${l.role as string}: ${l.text as string}`);

/**
 * The `i`th message of a session: 200 characters, so that its history line ("user: …") is 206
 * characters, 52 estimated tokens, and the echoed reply's ("assistant: echo: …") 217, 55 tokens.
 * An exchange is 107 tokens: the fifth message's run would see 4 × 107 = 428 > 400.
 */
const text = (key: string, i: number): string => `${key} message ${i} `.padEnd(200, '.');

/** Sends one message, waits for its run and its reply; returns the system prompt the agent got. */
async function exchange(key: string, i: number): Promise<string> {
  const res = await post(stack.url, `/v1/sessions/${key}/messages`, { text: text(key, i) });
  expect(res.status).toBe(202);
  const doc = await waitFor(stack.url, res.body.runId as string);
  expect(doc.status).toBe('succeeded');
  await laneIdle(stack, key);
  const request = await model.received(
    (r) => systemOf(r).startsWith(AGENT_PROMPT) && lastUser(r) === text(key, i),
  );
  return systemOf(request);
}

// The tests of session `long` continue one conversation, in order.
describe('compaction', () => {
  it('changes nothing below the threshold: runs see every message of the context', async () => {
    const before = summaries;
    let system = '';
    // Short messages: 7 exchanges stay far below 400 tokens, and more than 10 messages are seen.
    for (let i = 1; i <= 7; i++) {
      const res = await post(stack.url, '/v1/sessions/short/messages', { text: `short ${i}` });
      await waitFor(stack.url, res.body.runId as string);
      await laneIdle(stack, 'short');
      system = systemOf(await model.received((r) => lastUser(r) === `short ${i}`));
    }
    const lines = await transcript(stack.url, 'short');
    expect(lines.some((l) => l.type === 'compaction')).toBe(false);
    expect(system).not.toContain('Summary of the earlier conversation');
    const seen = Array.from({ length: 6 }, (_, i) => `user: short ${i + 1}\nassistant: echo: short ${i + 1}`);
    expect(system).toContain(`Conversation so far:\n${seen.join('\n')}`);
    expect(system).not.toContain('user: short 7');
    expect(summaries).toBe(before);
  });

  it('folds the older turns into a model summary; the next run sees it and the recent turns', async () => {
    const key = 'long';
    for (let i = 1; i <= 4; i++) await exchange(key, i);
    expect((await transcript(stack.url, key)).some((l) => l.type === 'compaction')).toBe(false);
    const before = model.requests.length;
    const system = await exchange(key, 5);

    // One summary request, for the three oldest exchanges.
    const asked = model.requests.slice(before).filter(isSummary);
    expect(asked).toHaveLength(1);
    const request = lastUser(asked[0]!);
    for (let i = 1; i <= 3; i++) {
      expect(request).toContain(`user: ${text(key, i)}`);
      expect(request).toContain(`assistant: echo: ${text(key, i)}`);
    }
    expect(request).not.toContain(text(key, 4));
    const summary = `SUMMARY#${summaries}`;

    // The run sees the summary and the latest exchange, nothing older.
    expect(system).toContain(`Summary of the earlier conversation: ${summary}\n\nConversation so far:\n`);
    expect(system).toContain(`user: ${text(key, 4)}\nassistant: echo: ${text(key, 4)}`);
    for (let i = 1; i <= 3; i++) expect(system).not.toContain(text(key, i));

    // The transcript keeps every message; the compaction line is written as the run of the message
    // that triggered it is prepared, just before that message's line, which goes in with its
    // admission (index 12: after 4 exchanges of user, assistant and run lines), and stands for
    // the lines before the first kept one (the 4th user message, at 9).
    const lines = await transcript(stack.url, key);
    expect(messages(lines)).toEqual(
      Array.from({ length: 5 }, (_, i) => [
        `user: ${text(key, i + 1)}`,
        `assistant: echo: ${text(key, i + 1)}`,
      ]).flat(),
    );
    expect(lines.findIndex((l) => l.type === 'compaction')).toBe(12);
    expect(lines[13]).toMatchObject({ type: 'message', role: 'user', text: text(key, 5) });
    expect(lines[12]).toEqual({
      type: 'compaction',
      summary,
      covers: { fromIndex: 0, toIndex: 8, messages: 6 },
      tokens: { before: 428, after: 107 + Math.ceil(summary.length / 4) },
      by: 'model',
      at: expect.any(String),
    });
  });

  it('rolls the previous summary into the next one', async () => {
    const key = 'long';
    const first = `SUMMARY#${summaries}`;
    // After the first compaction the run sees the summary (3 tokens) and 1 exchange; the eighth
    // message's run would see 3 + 4 × 107 > 400.
    for (let i = 6; i <= 7; i++) await exchange(key, i);
    const before = model.requests.length;
    const system = await exchange(key, 8);
    const asked = model.requests.slice(before).filter(isSummary);
    expect(asked).toHaveLength(1);
    const request = lastUser(asked[0]!);
    expect(request).toContain(`Summary of what came before it:\n${first}\n`);
    expect(request).toContain(`user: ${text(key, 4)}`);
    expect(request).toContain(`assistant: echo: ${text(key, 6)}`);
    expect(request).not.toContain(text(key, 3));
    expect(request).not.toContain(text(key, 7));
    const second = `SUMMARY#${summaries}`;
    expect(system).toContain(`Summary of the earlier conversation: ${second}\n`);
    expect(system).not.toContain(first);
    expect(system).toContain(`user: ${text(key, 7)}`);
    expect(system).not.toContain(text(key, 6));

    const compactions = (await transcript(stack.url, key)).filter((l) => l.type === 'compaction');
    expect(compactions.map((c) => [c.summary, c.covers])).toEqual([
      [first, { fromIndex: 0, toIndex: 8, messages: 6 }],
      // 7th user message: 3 lines per exchange and the first compaction line.
      [second, { fromIndex: 0, toIndex: 18, messages: 12 }],
    ]);
  });

  it('starts a fresh context on /new, without the earlier summary', async () => {
    const key = 'long';
    const res = await post(stack.url, `/v1/sessions/${key}/messages`, { text: '/new' });
    expect(res.body).toMatchObject({ command: 'new' });
    const system = await exchange(key, 9);
    expect(system).not.toContain('Summary of the earlier conversation');
    expect(system).not.toContain('Conversation so far');
    expect(system).not.toContain('SUMMARY#');
    // The new context compacts on its own: from its first line, with no earlier summary.
    for (let i = 10; i <= 12; i++) await exchange(key, i);
    const before = model.requests.length;
    await exchange(key, 13);
    const request = lastUser(model.requests.slice(before).find(isSummary)!);
    expect(request).not.toContain('Summary of what came before it');
    expect(request).toContain(`user: ${text(key, 9)}`);
    const lines = await transcript(stack.url, key);
    const reset = lines.findIndex((l) => l.type === 'command');
    // Three exchanges of three lines each folded: the lines after /new up to the 12th message.
    expect(lines.filter((l) => l.type === 'compaction').at(-1)).toMatchObject({
      covers: { fromIndex: reset + 1, toIndex: reset + 9, messages: 6 },
      by: 'model',
    });
  });

  it('falls back to a truncation with a marker when the model fails', async () => {
    const key = 'failing';
    summarise = () => ({ status: 500, error: { message: 'summariser down' } });
    try {
      for (let i = 1; i <= 4; i++) await exchange(key, i);
      const system = await exchange(key, 5);
      const compaction = (await transcript(stack.url, key)).find((l) => l.type === 'compaction')!;
      expect(compaction).toMatchObject({
        by: 'truncation',
        error: expect.stringContaining('summariser down'),
        covers: { fromIndex: 0, toIndex: 8, messages: 6 },
      });
      const summary = compaction.summary as string;
      // Within a quarter of the budget (400 characters), head and tail of the six folded lines.
      expect(summary.length).toBeLessThanOrEqual(400);
      expect(summary.startsWith(`user: ${text(key, 1)}`.slice(0, 150))).toBe(true);
      expect(summary.endsWith(`assistant: echo: ${text(key, 3)}`.slice(-150))).toBe(true);
      expect(summary).toMatch(/\n…\[\d earlier messages, \d+ chars omitted\]…\n/);
      // The run that triggered it saw that summary and the latest exchange.
      expect(system).toContain(`Summary of the earlier conversation: ${summary}\n\nConversation so far:\n`);
      expect(system).toContain(`user: ${text(key, 4)}`);
    } finally {
      summarise = modelSummary;
    }
  });
});

describe('compaction without a model', () => {
  it('is a deterministic truncation with a marker', async () => {
    // A sense pool without a model: no run can be made, so a message is refused and not kept; the
    // history is written directly, and the refused message's run is prepared (and compacts)
    // before it is refused.
    const bare = await startStack({
      pools: ['sense'],
      env: { TETRALOOP_SESSION_COMPACT_TOKENS: '400', TETRALOOP_WORKSPACE_DIR: workspace },
    });
    const redis = connectRedis(bare.env.REDIS_URL!, 'worker', 'compaction-test');
    try {
      const key = 'bare';
      const store = new SessionStore(redis, bare.prefix);
      // User lines of 52 tokens: the ninth message's history is 8 × 52 = 416 > 400.
      for (let i = 1; i <= 8; i++) {
        await store.appendTranscript(key, { type: 'message', role: 'user', text: text(key, i) });
      }
      const res = await post(bare.url, `/v1/sessions/${key}/messages`, { text: text(key, 9) });
      expect(res.body).toMatchObject({ error: { code: 'message_failed' } });
      const lines = await transcript(bare.url, key);
      expect(messages(lines)).toHaveLength(8);
      const compactions = lines.filter((l) => l.type === 'compaction');
      expect(compactions).toHaveLength(1);
      const [compaction] = compactions;
      // Three user lines (156 tokens) fit in half the budget: the five before them are folded.
      expect(compaction).toMatchObject({
        by: 'truncation',
        covers: { fromIndex: 0, toIndex: 4, messages: 5 },
        tokens: { before: 416 },
      });
      expect(compaction).not.toHaveProperty('error');
      const summary = compaction!.summary as string;
      const folded = Array.from({ length: 5 }, (_, i) => `user: ${text(key, i + 1)}`).join('\n');
      const marker = /\n…\[(\d) earlier messages, (\d+) chars omitted\]…\n/.exec(summary)!;
      expect(Number(marker[2])).toBe(folded.length - (summary.length - marker[0].length));
      expect(summary.length).toBeLessThanOrEqual(400);
      expect(folded.startsWith(summary.slice(0, marker.index))).toBe(true);
      expect(folded.endsWith(summary.slice(marker.index + marker[0].length))).toBe(true);
    } finally {
      redis.disconnect();
      await bare.close();
    }
  });
});
