/**
 * The gateway's loop on a real Redis, against the scripted model server and the real `openai`
 * SDK: sessions bound to an agent by their first message, `model` and `thinking` per message and
 * per run (the request the model server receives, the reasoning kept as the reply's), the
 * `agent:bootstrap` hook, `before_agent_start` / `agent_end` for runs outside sessions, and a
 * plugin's `refreshCredentials` renewing the model key after a 401.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { HookRegistry } from '@tetraloop/core/hooks';
import type { SessionView } from '@tetraloop/core/state';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { laneIdle, post, postRun, runToEnd, startStack, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
const started: { runId: string; agentId: string; sessionKey?: string }[] = [];
const ended: { runId: string; status: string; agentId?: string; sessionKey?: string }[] = [];

const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
const systemOf = (r: ChatRequest): string => r.messages.find((m) => m.role === 'system')?.content ?? '';
const toolNames = (r: ChatRequest): string[] =>
  ((r.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name).sort();

beforeAll(async () => {
  model = await startModelServer({
    script: (r) => ({
      // The planner (structured output) gets a one-node plan; anything else an echo.
      content: r.response_format
        ? JSON.stringify({ nodes: [{ id: 'say', kind: 'llm', prompt: 'planned step' }], edges: [] })
        : `echo: ${lastUser(r)}`,
      // A reasoning model says how it got there; the client keeps it only when asked.
      ...(r.model === 'reasoner' ? { reasoning: 'I thought about it carefully.' } : {}),
    }),
  });
  const registry = new HookRegistry();
  registry.on('agent:bootstrap', ({ agentId, files }) => ({
    files: [
      ...files.filter((f) => f.name !== 'USER.md'),
      { name: 'HOOKED.md', content: `added by a hook for ${agentId}` },
    ],
  }));
  registry.on('before_agent_start', ({ runId, agentId, task, sessionKey }) => {
    started.push({ runId, agentId, ...(sessionKey ? { sessionKey } : {}) });
    return task === 'plan with hooks' ? { context: `context from a hook for ${runId}` } : undefined;
  });
  registry.on('agent_end', (e) => {
    ended.push(e);
  });
  stack = await startStack({
    hooks: { registry },
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL: 'plain',
      TETRALOOP_MODELS_ALLOW: 'plain,reasoner',
      TETRALOOP_THINKING_MODELS: 'reason*',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_AGENT_TOOLS: JSON.stringify({ ops: ['json'] }),
      TETRALOOP_WORKSPACE_DIR: new URL('./fixtures/workspace', import.meta.url).pathname,
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
});

const say = (key: string, body: object): Promise<{ status: number; body: Record<string, unknown> }> =>
  post(stack.url, `/v1/sessions/${key}/messages`, body);
const session = async (key: string): Promise<SessionView> =>
  (await fetch(`${stack.url}/v1/sessions/${key}`).then((r) => r.json())) as SessionView;
const transcript = async (key: string): Promise<Record<string, unknown>[]> =>
  (await fetch(`${stack.url}/v1/sessions/${key}/transcript`).then((r) => r.text()))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
/** The model request that answered `text`. */
const requestFor = (text: string): Promise<ChatRequest> => model.received((r) => lastUser(r) === text);

describe('sessions choose their agent', () => {
  it("binds a session to its first message's agent: its workspace, tools and hooks", async () => {
    const first = await say('agent-ops', { text: 'ops first', agentId: 'ops' });
    expect(first.status).toBe(202);
    const doc = await waitFor(stack.url, first.body.runId as string);
    expect(doc).toMatchObject({ status: 'succeeded', agentId: 'ops' });
    const request = await requestFor('ops first');
    // The ops workspace, not main's; the hook's edit (USER.md dropped, HOOKED.md added).
    expect(systemOf(request)).toContain('You are the ops agent');
    expect(systemOf(request)).not.toContain('## AGENTS.md');
    expect(systemOf(request)).toContain('## HOOKED.md\nadded by a hook for ops');
    expect(toolNames(request)).toEqual(['json']);
    expect(started).toContainEqual({ runId: doc.runId, agentId: 'ops', sessionKey: 'agent-ops' });
    await expect.poll(() => ended.find((e) => e.runId === doc.runId)).toMatchObject({ agentId: 'ops' });

    // A later message without agentId runs the bound agent.
    await laneIdle(stack, 'agent-ops');
    const later = await say('agent-ops', { text: 'ops later' });
    expect(later.status).toBe(202);
    expect(await waitFor(stack.url, later.body.runId as string)).toMatchObject({ agentId: 'ops' });
    expect(await session('agent-ops')).toMatchObject({ agentId: 'ops' });
    const listed = (await fetch(`${stack.url}/v1/sessions?limit=100`).then((r) => r.json())) as {
      sessions: SessionView[];
    };
    expect(listed.sessions.find((s) => s.sessionKey === 'agent-ops')).toMatchObject({ agentId: 'ops' });
  });

  it('refuses a message naming another agent than the bound one with 409 on agentId', async () => {
    await laneIdle(stack, 'agent-ops');
    const other = await say('agent-ops', { text: 'as main', agentId: 'main' });
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({
      error: { code: 'session_agent_conflict', issues: [{ path: 'agentId' }] },
    });
    expect((await transcript('agent-ops')).some((l) => l.text === 'as main')).toBe(false);
  });

  it('binds a session whose first message names no agent to main; an unknown agent is a 400', async () => {
    const placed = await say('agent-main', { text: 'hello main' });
    expect(placed.status).toBe(202);
    await waitFor(stack.url, placed.body.runId as string);
    expect(await session('agent-main')).toMatchObject({ agentId: 'main' });
    expect(systemOf(await requestFor('hello main'))).toContain('## AGENTS.md');
    const unknown = await say('agent-nobody', { text: 'hi', agentId: 'nobody' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ error: { issues: [{ path: 'agentId' }] } });
  });
});

describe('model and thinking', () => {
  it('sends a message’s model and reasoning effort, and keeps the reasoning as the reply’s', async () => {
    const placed = await say('think', {
      text: 'think hard',
      model: 'reasoner',
      thinking: { effort: 'high', summary: true },
    });
    expect(placed.status).toBe(202);
    const doc = await waitFor(stack.url, placed.body.runId as string);
    expect(doc.status).toBe('succeeded');
    const request = await requestFor('think hard');
    expect(request).toMatchObject({ model: 'reasoner', reasoning_effort: 'high' });
    // The reply is written as the lane moves on, just after the run settles.
    await laneIdle(stack, 'think');
    const reply = (await transcript('think')).find((l) => l.role === 'assistant');
    expect(reply).toMatchObject({ text: 'echo: think hard', reasoning: 'I thought about it carefully.' });
  });

  it('sends no effort to a model that takes none, and keeps no reasoning unless asked', async () => {
    const plain = await say('think-plain', { text: 'plain effort', thinking: 'low' });
    await waitFor(stack.url, plain.body.runId as string);
    const request = await requestFor('plain effort');
    expect(request.model).toBe('plain');
    expect(request).not.toHaveProperty('reasoning_effort');

    await laneIdle(stack, 'think');
    const quiet = await say('think', { text: 'no summary', model: 'reasoner', thinking: 'medium' });
    await waitFor(stack.url, quiet.body.runId as string);
    expect(await requestFor('no summary')).toMatchObject({ reasoning_effort: 'medium' });
    await laneIdle(stack, 'think');
    const reply = (await transcript('think')).find((l) => l.text === 'echo: no summary');
    expect(reply).toBeDefined();
    expect(reply).not.toHaveProperty('reasoning');
  });

  it('refuses a model the operator does not allow, and a thinking it does not know, naming the field', async () => {
    const model = await say('think-bad', { text: 'x', model: 'gpt-unknown' });
    expect(model.status).toBe(400);
    expect(model.body).toMatchObject({ error: { issues: [{ path: 'model' }] } });
    expect((model.body.error as { issues: { message: string }[] }).issues[0]!.message).toMatch(
      /TETRALOOP_MODELS_ALLOW/,
    );
    const thinking = await say('think-bad', { text: 'x', thinking: 'extreme' });
    expect(thinking.status).toBe(400);
    expect(thinking.body).toMatchObject({ error: { issues: [{ path: 'thinking' }] } });
    const run = await postRun(stack.url, { task: 'x', mode: 'loop', model: 'gpt-unknown' });
    expect(run.status).toBe(400);
    expect(run.body).toMatchObject({ error: { issues: [{ path: 'model' }] } });
    const graph = await postRun(stack.url, { graph: { nodes: [] }, thinking: 'low' });
    expect(graph.status).toBe(400);
    expect(graph.body).toMatchObject({ error: { issues: [{ path: 'thinking' }] } });
  });

  it('takes model and thinking per run: the agent’s output carries the reasoning', async () => {
    const doc = await runToEnd(stack.url, {
      task: 'run-level thinking',
      mode: 'loop',
      model: 'reasoner',
      thinking: { effort: 'low', summary: true },
    });
    expect(doc.status).toBe('succeeded');
    expect(await requestFor('run-level thinking')).toMatchObject({
      model: 'reasoner',
      reasoning_effort: 'low',
    });
    expect(doc.output).toMatchObject({ agent: { reasoning: 'I thought about it carefully.' } });
    // The run document says what the run asked for.
    expect(doc).toMatchObject({ model: 'reasoner', thinking: { effort: 'low', summary: true } });
  });
});

describe('dag-mode runs', () => {
  it("ask the planner with the run's model and effort, the hooks' bootstrap files and context", async () => {
    const doc = await runToEnd(stack.url, { task: 'plan with hooks', model: 'reasoner', thinking: 'high' });
    expect(doc.status).toBe('succeeded');
    const planner = await model.received(
      (r) => r.response_format !== undefined && lastUser(r).includes('plan with hooks'),
    );
    expect(planner).toMatchObject({ model: 'reasoner', reasoning_effort: 'high' });
    expect(systemOf(planner)).toContain('## HOOKED.md\nadded by a hook for main');
    expect(systemOf(planner)).toContain(`context from a hook for ${doc.runId}`);
    // The planned llm node calls the deployment's model.
    expect((await requestFor('planned step')).model).toBe('plain');
    expect(doc).toMatchObject({ model: 'reasoner', thinking: 'high' });
  });
});

describe('run hooks outside sessions', () => {
  it('fire before_agent_start and agent_end for a plain run, once each', async () => {
    const doc: RunDocument = await runToEnd(stack.url, { task: 'no session here', mode: 'loop' });
    expect(doc.status).toBe('succeeded');
    expect(started.filter((s) => s.runId === doc.runId)).toEqual([{ runId: doc.runId, agentId: 'main' }]);
    await expect
      .poll(() => ended.filter((e) => e.runId === doc.runId))
      .toEqual([{ runId: doc.runId, status: 'succeeded', agentId: 'main' }]);
  });
});

describe('credential refresh from a plugin', () => {
  let keyed: ModelServer;
  let plugged: Stack;
  const calls = (): { tool: string; code: string }[] =>
    ((
      globalThis as { __tetraloopRefreshCalls?: { tool: string; code: string }[] }
    ).__tetraloopRefreshCalls ??= []);

  beforeAll(async () => {
    // 401 until the request carries the key the plugin's refresh hands out.
    keyed = await startModelServer({
      script: (_r, _i, headers) =>
        headers.authorization === 'Bearer fresh-key'
          ? { content: 'authorised' }
          : { status: 401, error: { message: 'invalid api key', type: 'invalid_request_error' } },
    });
    plugged = await startStack({
      pools: ['plan', 'tool'],
      env: {
        OPENAI_BASE_URL: keyed.url,
        OPENAI_API_KEY: 'stale-key',
        TETRALOOP_PLUGINS: new URL('./fixtures/plugins/refresh-model-key.mjs', import.meta.url).pathname,
      },
    });
  });
  afterAll(async () => {
    await plugged?.close();
    await keyed?.close();
  });

  it('retries a 401 once after the plugin renewed the key, and the run succeeds', async () => {
    const doc = await runToEnd(plugged.url, { task: 'needs a fresh key', mode: 'loop' });
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toMatchObject({ agent: { text: 'authorised' } });
    expect(calls()).toEqual([{ tool: 'loop', code: 'auth' }]);
    expect(keyed.requests).toHaveLength(2);
    expect(doc.nodes.agent!.attempts.map((a) => a.error?.code ?? 'ok')).toEqual(['auth', 'ok']);
    // The key itself is nowhere in the run.
    expect(JSON.stringify(doc)).not.toContain('fresh-key');
  });
});
