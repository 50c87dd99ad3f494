/**
 * `tetraloop agent --message`: a message into a session's lane, or a one-off loop run, through the
 * API, with `--wait` printing the agent's reply — the command's function in-process against a
 * stack and the scripted model server.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { agentCommand } from '@tetraloop/cli';
import { recordedClientIo, type RecordedClientIo } from './support/cli-io.js';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { startStack, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;

const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';

beforeAll(async () => {
  model = await startModelServer({ script: (r) => ({ content: `echo: ${lastUser(r)}` }) });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: { OPENAI_BASE_URL: model.url, TETRALOOP_MODEL: 'scripted', TETRALOOP_MODEL_MAX_RETRIES: '0' },
  });
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
});

const io = (): RecordedClientIo => recordedClientIo(stack.url);

it('sends a message into a session and, with --wait, prints the reply', async () => {
  const first = io();
  expect(await agentCommand(['--message', 'hello there', '--session', 'cli-chat', '--wait'], first)).toBe(0);
  expect(first.out.join('')).toBe('echo: hello there\n');
  expect(first.err.join('')).toMatch(/^run [0-9a-f-]{36} in session cli-chat\n$/);
  // The session kept it: the next message sees the conversation.
  const second = io();
  expect(await agentCommand(['-m', 'and again', '--session', 'cli-chat', '--wait'], second)).toBe(0);
  const asked = model.requests.at(-1)!.messages.map((m) => m.content ?? '');
  expect(asked.join('\n')).toContain('hello there');
});

it('runs a one-off loop run of an agent; without --wait it returns at once with the run id', async () => {
  const waited = io();
  expect(await agentCommand(['--message', 'just once', '--wait'], waited)).toBe(0);
  expect(waited.out.join('')).toBe('echo: just once\n');
  const quick = io();
  expect(await agentCommand(['--message', 'no waiting', '--json'], quick)).toBe(0);
  expect(JSON.parse(quick.out.join(''))).toMatchObject({ runId: expect.any(String), status: 'queued' });
});

it('says what is wrong with the command line (exit 2) and with the API (exit 1)', async () => {
  const none = io();
  expect(await agentCommand(['--wait'], none)).toBe(2);
  expect(none.err.join('')).toContain('agent needs --message');
  const both = io();
  expect(await agentCommand(['-m', 'x', '--session', 's', '--agent', 'a'], both)).toBe(2);
  const away = io();
  expect(await agentCommand(['-m', 'x'], { ...away, target: { url: 'http://127.0.0.1:9' } })).toBe(1);
  expect(away.err.join('')).toContain('TETRALOOP_API_URL');
});
