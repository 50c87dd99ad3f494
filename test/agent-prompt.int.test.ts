/**
 * Every agent run's prompt is made the same way: a loop-mode run from `POST /v1/runs`, a one-off
 * `tetraloop agent --message` and a session's run all send the model the agent's skills, its
 * workspace files (as an `agent:bootstrap` hook leaves them), its lessons and the runtime
 * overrides, in that order; the run records the skills' hash, and a skill needing a tool the agent
 * may not use is refused with a line naming both. `--model` and `--thinking` reach the request.
 * The real stack, a workspace on disk and the scripted OpenAI-compatible model server.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { agentCommand, runGraphFile, type RunIo } from '@tetraloop/cli';
import { HookRegistry } from '@tetraloop/core/hooks';
import { MemoryStore } from '@tetraloop/core/state';
import { recordedClientIo, type RecordedClientIo } from './support/cli-io.js';
import { lessonRecord } from './support/lessons.js';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { runToEnd, startStack, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
const workspace = mkdtempSync(join(tmpdir(), 'tetraloop-agent-prompt-'));

const skill = (name: string, tools: string[], body: string): string =>
  `---\nname: ${name}\ndescription: What ${name} is for\ntools: [${tools.join(', ')}]\n---\n${body}\n`;

const now = new Date().toISOString();
const lesson = lessonRecord(
  {
    agentId: 'main',
    rule: 'service-flaky',
    scope: { tool: 'http', host: 'flaky.test' },
    statement: 'flaky.test often fails for http',
  },
  now,
);

beforeAll(async () => {
  mkdirSync(join(workspace, 'main', 'skills'), { recursive: true });
  writeFileSync(join(workspace, 'main', 'AGENTS.md'), 'MAIN AGENTS FILE');
  writeFileSync(
    join(workspace, 'main', 'skills', '1-shaping.md'),
    skill('shaping', ['json'], 'SHAPING BODY'),
  );
  writeFileSync(
    join(workspace, 'main', 'skills', '2-fetching.md'),
    skill('fetching', ['http'], 'FETCHING BODY'),
  );
  const registry = new HookRegistry();
  registry.on('agent:bootstrap', ({ files }) => ({
    files: [...files, { name: 'HOOKED.md', content: 'ADDED BY THE HOOK' }],
  }));
  registry.on('before_agent_start', ({ task }) => ({ context: `STARTING ON ${task}` }));
  model = await startModelServer({ script: () => ({ content: 'done' }) });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    hooks: { registry },
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL: 'scripted',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_THINKING_MODELS: 'scripted*',
      TETRALOOP_MODELS_ALLOW: 'scripted,scripted-large',
      TETRALOOP_WORKSPACE_DIR: workspace,
      // The agent may use `json` only: the skill that needs `http` is refused.
      TETRALOOP_AGENTS: JSON.stringify({ main: { tools: ['json'] } }),
    },
  });
  const redis = new Redis(stack.env.REDIS_URL!);
  await new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 }).saveReflection(
    'main',
    [lesson],
    true,
    now,
  );
  redis.disconnect();
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
});

const systemOf = (r: ChatRequest): string => r.messages.find((m) => m.role === 'system')?.content ?? '';
const lastAsking = (text: string): ChatRequest =>
  model.requests.findLast((r) => r.messages.some((m) => m.role === 'user' && m.content === text))!;

const refused = {
  file: 'skills/2-fetching.md',
  skill: 'fetching',
  tool: 'http',
  reason: 'skill "fetching" needs tool "http", which agent "main" may not use',
};

const io = (): RecordedClientIo => recordedClientIo(stack.url);

let loopHash = '';

it('a loop-mode run sends skills, workspace files, the hook’s file, lessons and overrides in order', async () => {
  const doc = await runToEnd(stack.url, { task: 'loop task', mode: 'loop', overrides: 'THE OVERRIDES' });
  expect(doc.status).toBe('succeeded');
  const system = systemOf(lastAsking('loop task'));
  const at = (s: string): number => system.indexOf(s);
  for (const part of [
    '## Skill: shaping',
    'SHAPING BODY',
    'MAIN AGENTS FILE',
    'ADDED BY THE HOOK',
    lesson.statement,
  ])
    expect(system).toContain(part);
  expect(system).not.toContain('FETCHING BODY');
  expect(at('You are an agent')).toBe(0);
  expect(at('## Skill: shaping')).toBeLessThan(at('## AGENTS.md'));
  expect(at('## AGENTS.md')).toBeLessThan(at('## HOOKED.md'));
  expect(at('## HOOKED.md')).toBeLessThan(at('## Lessons'));
  expect(at('## Lessons')).toBeLessThan(at('## Runtime overrides\nTHE OVERRIDES'));
  // The before_agent_start hooks' context follows the request's overrides.
  expect(system).toContain('THE OVERRIDES\n\nSTARTING ON loop task');
  // The run records the skills its prompt holds, and the one refused with why.
  expect(doc.skills).toEqual({
    hash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
    loaded: ['shaping'],
    refused: [refused],
  });
  expect(doc.planning).toBeNull();
  loopHash = doc.skills!.hash;
});

it('tetraloop agent --message without a session makes the same prompt; --model and --thinking reach the request', async () => {
  const once = io();
  const code = await agentCommand(
    ['--message', 'one-off', '--model', 'scripted-large', '--thinking', 'high', '--wait', '--json'],
    once,
  );
  expect(code).toBe(0);
  const asked = lastAsking('one-off');
  expect(asked.model).toBe('scripted-large');
  expect(asked.reasoning_effort).toBe('high');
  const system = systemOf(asked);
  for (const part of ['SHAPING BODY', 'MAIN AGENTS FILE', 'ADDED BY THE HOOK', lesson.statement])
    expect(system).toContain(part);
  const doc = JSON.parse(once.out.join('')) as { skills: { hash: string }; model: string; thinking: string };
  expect(doc).toMatchObject({ model: 'scripted-large', thinking: 'high', skills: { hash: loopHash } });
});

it('a session run records the same skills, made by the same assembly', async () => {
  const said = io();
  expect(
    await agentCommand(
      ['--message', 'in a session', '--session', 'prompted', '--thinking', 'low', '--wait'],
      said,
    ),
  ).toBe(0);
  const asked = lastAsking('in a session');
  expect(asked.reasoning_effort).toBe('low');
  const system = systemOf(asked);
  for (const part of ['SHAPING BODY', 'MAIN AGENTS FILE', 'ADDED BY THE HOOK', lesson.statement])
    expect(system).toContain(part);
  const runId = /^run (\S+) in session/.exec(said.err.join(''))![1]!;
  expect((await waitFor(stack.url, runId)).skills).toEqual({
    hash: loopHash,
    loaded: ['shaping'],
    refused: [refused],
  });
});

it('refuses a --thinking the model call does not take, naming what it takes (exit 2)', async () => {
  const wrong = io();
  expect(await agentCommand(['--message', 'x', '--thinking', 'extreme'], wrong)).toBe(2);
  expect(wrong.err.join('')).toContain("--thinking takes one of minimal, low, medium, high, not 'extreme'");
});

it('tetraloop run takes --model and --thinking over the file’s request, and refuses an unknown effort (exit 2)', async () => {
  const file = join(workspace, 'request.json');
  writeFileSync(file, JSON.stringify({ task: 'from a file', mode: 'loop', model: 'scripted' }));
  const out: string[] = [];
  const err: string[] = [];
  const runIo: RunIo = { stdout: (t) => void out.push(t), stderr: (t) => void err.push(t), tty: false };
  const target = { url: stack.url };
  const call = { model: 'scripted-large', thinking: 'medium' };
  expect(await runGraphFile(file, { follow: false, target, io: runIo, call })).toBe(0);
  const asked = lastAsking('from a file');
  expect(asked.model).toBe('scripted-large');
  expect(asked.reasoning_effort).toBe('medium');
  expect(systemOf(asked)).toContain('MAIN AGENTS FILE');
  const wrong = { model: undefined, thinking: 'max' };
  expect(await runGraphFile(file, { follow: false, target, io: runIo, call: wrong })).toBe(2);
  expect(err.join('')).toContain("run: --thinking takes one of minimal, low, medium, high, not 'max'");
});
