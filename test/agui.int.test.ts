/**
 * AG-UI with its own client: `@ag-ui/client`'s HttpAgent against the real stack (API, sense, plan
 * and tool pools, Redis) and a scripted model that streams. The client checks the order of every
 * event it is sent; these tests check what arrives: a run's text as deltas while the model is still
 * writing, an agent's tool call as its events, an approval that ends the AG-UI run with an
 * interrupt and is answered by the next request; and a tenant's threads, interrupts and agents
 * out of another tenant's reach.
 */
import { randomUUID } from 'node:crypto';
import { HttpAgent, buildResumeArray, type AgentSubscriber, type BaseEvent } from '@ag-ui/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { HookRegistry } from '@tetraloop/core/hooks';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { startKeyedStack, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
/** How the scripted model answers the current test's requests. */
let answer: (request: ChatRequest) => ScriptedReply | Promise<ScriptedReply>;
let acme: string;
let beta: string;

beforeAll(async () => {
  model = await startModelServer({ script: (r) => answer(r) });
  const registry = new HookRegistry();
  // A json call of the value "gated" waits for a person's approval.
  registry.on('before_tool_call', ({ tool, args }) =>
    tool === 'json' && (args as { value?: unknown }).value === 'gated'
      ? { requireApproval: 'a person approves gated values' }
      : undefined,
  );
  const keyed = await startKeyedStack({
    hooks: { registry },
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // beta may run only its own agent.
      TETRALOOP_TENANTS: JSON.stringify({ beta: { agents: ['helper'] } }),
    },
    tenants: ['acme', 'beta'],
    scopes: ['sessions:write', 'sessions:read', 'signals:write', 'runs:read'],
  });
  ({ stack } = keyed);
  [acme, beta] = [keyed.keys.acme!, keyed.keys.beta!];
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
});

/** An AG-UI agent of `agentId` on thread `threadId`, with the user's message to answer. */
function agentFor(threadId: string, text: string, key = acme, agentId = 'main'): HttpAgent {
  const agent = new HttpAgent({
    url: `${stack.url}/v1/agui/${agentId}`,
    headers: { authorization: `Bearer ${key}` },
    threadId,
  });
  agent.addMessage({ id: randomUUID(), role: 'user', content: text });
  return agent;
}

/** Runs the agent once, collecting every event the client applied. */
async function run(
  agent: HttpAgent,
  parameters: Parameters<HttpAgent['runAgent']>[0] = {},
  subscriber: AgentSubscriber = {},
): Promise<BaseEvent[]> {
  const events: BaseEvent[] = [];
  await agent.runAgent(parameters, {
    ...subscriber,
    onEvent: ({ event }) => {
      events.push(event);
    },
  });
  return events;
}

/** Whether the request holds a result of a tool call the model made (the context is one of its own). */
const toolAnswered = (r: ChatRequest): boolean =>
  r.messages.some((m) => m.role === 'tool' && m.tool_call_id?.startsWith('call_'));

const typesOf = (events: BaseEvent[]): string[] => events.map((e) => e.type);
/** The first event of an AG-UI type (the client's enum holds the same strings). */
const firstOf = (events: BaseEvent[], type: string): BaseEvent | undefined =>
  events.find((e) => (e.type as string) === type);

async function get<T>(path: string, key = acme): Promise<{ status: number; body: T }> {
  const res = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as T };
}

describe('AG-UI over HttpAgent', () => {
  it("streams a run's text as deltas while the model is still writing it", async () => {
    const pieces = ['Hello', ' from', ' Tetraloop'];
    const deltas: string[] = [];
    /** Resolves once the client holds `n` deltas. */
    const waiters: { n: number; resolve: () => void }[] = [];
    const untilDeltas = (n: number): Promise<void> =>
      deltas.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }));
    // Each piece after the first is sent only once the client got the one before: the text cannot
    // arrive in one piece after the model finished.
    answer = () => ({
      content: pieces.join(''),
      pieces,
      beforePiece: (index) => untilDeltas(index),
    });
    const agent = agentFor('chat-text', 'say hello');
    const events = await run(
      agent,
      {},
      {
        onTextMessageContentEvent: ({ event }) => {
          deltas.push(event.delta);
          for (const w of waiters.filter((w) => deltas.length >= w.n)) w.resolve();
        },
      },
    );

    expect(deltas).toEqual(pieces);
    const types = typesOf(events);
    expect(types[0]).toBe('RUN_STARTED');
    expect(types[1]).toBe('STATE_SNAPSHOT');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    expect(types).toEqual(
      expect.arrayContaining([
        'STEP_STARTED',
        'TEXT_MESSAGE_START',
        'TEXT_MESSAGE_END',
        'STEP_FINISHED',
        'STATE_DELTA',
      ]),
    );
    expect(firstOf(events, 'STEP_STARTED')).toMatchObject({ stepName: 'agent' });
    expect(events.at(-1)).toMatchObject({
      threadId: 'chat-text',
      usage: [expect.objectContaining({ outputTokens: expect.any(Number) })],
    });
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Hello from Tetraloop' });
    // The state: the run under `tetraloop`, kept up to date by JSON Patch deltas.
    expect(agent.state).toMatchObject({ tetraloop: { status: 'succeeded', nodes: { agent: 'succeeded' } } });
    // The thread is a session of the caller's tenant, bound to the agent.
    const session = await get<{ agentId: string }>('/v1/sessions/chat-text');
    expect(session).toMatchObject({ status: 200, body: { agentId: 'main' } });
    expect((await get('/v1/sessions/chat-text', beta)).status).toBe(404);
  });

  it("shows an agent's tool call as its events, and hands the client's context to the run", async () => {
    answer = (r) =>
      toolAnswered(r)
        ? { content: 'The value is 42.' }
        : { content: '', toolCalls: [{ name: 'json', arguments: { value: 42 } }] };
    const agent = agentFor('chat-tool', 'what is the value?');
    const events = await run(agent, { context: [{ description: 'page', value: 'settings' }] });

    const types = typesOf(events);
    const start = types.indexOf('TOOL_CALL_START');
    expect(types.slice(start, start + 3)).toEqual(['TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END']);
    const call = events[start] as BaseEvent & { toolCallId: string };
    expect(call).toMatchObject({ toolCallName: 'json' });
    expect(JSON.parse((events[start + 1] as BaseEvent & { delta: string }).delta)).toEqual({ value: 42 });
    const result = firstOf(events, 'TOOL_CALL_RESULT') as BaseEvent & { content: string };
    expect(result).toMatchObject({ toolCallId: call.toolCallId });
    expect(JSON.parse(result.content)).toBe(42);
    expect(types.indexOf('TOOL_CALL_RESULT')).toBeLessThan(types.lastIndexOf('TEXT_MESSAGE_START'));
    // The client's messages: the call, its result, the answer.
    expect(agent.messages.slice(1)).toMatchObject([
      { role: 'assistant', toolCalls: [{ id: call.toolCallId, function: { name: 'json' } }] },
      { role: 'tool', toolCallId: call.toolCallId },
      { role: 'assistant', content: 'The value is 42.' },
    ]);
    // The context reached the model as delimited outside data, not as the user's words.
    const first = model.requests.findLast((r) => JSON.stringify(r.messages).includes('what is the value?'))!;
    expect(JSON.stringify(first.messages)).toContain('settings');
    expect(first.messages.findLast((m) => m.role === 'user')?.content).not.toContain('settings');
  });

  it('ends the AG-UI run with an interrupt when a tool call waits for approval, and goes on when the next request approves it', async () => {
    answer = (r) =>
      toolAnswered(r)
        ? { content: 'Approved and done.' }
        : { content: 'Let me check.', toolCalls: [{ name: 'json', arguments: { value: 'gated' } }] };
    const agent = agentFor('chat-approval', 'check the gated value');
    const first = await run(agent);

    const finished = first.at(-1) as BaseEvent & { outcome: { type: string; interrupts: unknown[] } };
    expect(finished).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'interrupt' } });
    const call = firstOf(first, 'TOOL_CALL_START') as BaseEvent & { toolCallId: string };
    expect(agent.pendingInterrupts).toEqual([
      expect.objectContaining({
        reason: 'tool_approval',
        toolCallId: call.toolCallId,
        message: expect.stringContaining('a person approves gated values'),
        responseSchema: expect.objectContaining({ required: ['approved'] }),
        expiresAt: expect.any(String),
      }),
    ]);
    expect(typesOf(first)).not.toContain('TOOL_CALL_RESULT');
    expect(agent.state).toMatchObject({ tetraloop: { nodes: { agent: 'waiting' } } });
    const [interrupt] = agent.pendingInterrupts;

    // Another tenant cannot answer it: to beta, the interrupt does not exist.
    const stolen = await fetch(`${stack.url}/v1/agui/helper`, {
      method: 'POST',
      headers: { authorization: `Bearer ${beta}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        threadId: 'chat-approval',
        runId: randomUUID(),
        messages: [],
        resume: [{ interruptId: interrupt!.id, status: 'resolved', payload: { approved: true } }],
      }),
    });
    expect(stolen.status).toBe(404);
    expect(await stolen.json()).toMatchObject({ error: { code: 'interrupt_not_found' } });

    const second = await run(agent, {
      resume: buildResumeArray(agent.pendingInterrupts, {
        [interrupt!.id]: { status: 'resolved', payload: { approved: true } },
      }),
    });
    const types = typesOf(second);
    expect(types[0]).toBe('RUN_STARTED');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    expect(second.at(-1)).not.toHaveProperty('outcome.type', 'interrupt');
    // The stream goes on after the place it stopped. The held turn is done again as the node's job
    // re-enters (docs/execution-model.md): the model's call, approved now, runs and its result comes.
    expect(types.slice(0, 3)).toEqual(['RUN_STARTED', 'STATE_SNAPSHOT', 'STEP_STARTED']);
    const redone = firstOf(second, 'TOOL_CALL_START') as BaseEvent & { toolCallId: string };
    expect(redone).toMatchObject({ toolCallName: 'json' });
    expect(firstOf(second, 'TOOL_CALL_RESULT')).toMatchObject({
      toolCallId: redone.toolCallId,
      content: '"gated"',
    });
    expect(agent.pendingInterrupts).toEqual([]);
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Approved and done.' });
    expect(agent.state).toMatchObject({ tetraloop: { status: 'succeeded' } });

    // One Tetraloop run throughout, its approval recorded with the key that gave it.
    const runId = (interrupt!.metadata as { tetraloop: { runId: string } }).tetraloop.runId;
    const doc = (await get<RunDocument>(`/v1/runs/${runId}`)).body;
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.agent?.waits?.[0]).toMatchObject({
      approval: { tool: 'json' },
      decidedBy: { tenant: 'acme' },
    });
  });
});

describe('POST /v1/agui/:agentId refuses', () => {
  const post = async (
    path: string,
    body: unknown,
    key = acme,
  ): Promise<{ status: number; body: unknown }> => {
    const res = await fetch(`${stack.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  const input = (extra: object = {}) => ({
    threadId: 'chat-refused',
    runId: 'r',
    messages: [{ id: 'm1', role: 'user', content: 'hi' }],
    ...extra,
  });

  it('bad input with a 400 naming the field', async () => {
    expect(await post('/v1/agui/main', input({ threadId: 'not a key!' }))).toMatchObject({
      status: 400,
      body: { error: { issues: [{ path: 'threadId' }] } },
    });
    expect(
      await post('/v1/agui/main', input({ messages: [{ id: 'a', role: 'assistant', content: 'hi' }] })),
    ).toMatchObject({ status: 400, body: { error: { issues: [{ path: 'messages' }] } } });
    expect(
      await post('/v1/agui/main', input({ messages: [{ id: 'a', role: 'user', content: [] }] })),
    ).toMatchObject({ status: 400, body: { error: { issues: [{ path: 'messages.0.content' }] } } });
    expect(
      await post('/v1/agui/main', input({ resume: [{ interruptId: 'made-up', status: 'resolved' }] })),
    ).toMatchObject({ status: 404, body: { error: { issues: [{ path: 'resume.0.interruptId' }] } } });
  });

  it('an agent the tenant may not run as not found, and a thread bound to another agent as a conflict', async () => {
    expect(await post('/v1/agui/main', input(), beta)).toMatchObject({
      status: 404,
      body: { error: { code: 'agent_not_found' } },
    });
    // chat-text is acme's session of `main`.
    expect(await post('/v1/agui/other', input({ threadId: 'chat-text' }))).toMatchObject({
      status: 409,
      body: { error: { code: 'session_agent_conflict' } },
    });
  });
});
