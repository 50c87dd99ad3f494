/**
 * A2A with the official client (`@a2a-js/sdk`) against the whole stack, auth required: the cards
 * (the open well-known one and each agent's), a message answered as a completed task, one
 * streamed, a task read and cancelled, a run waiting for a signal seen as `input-required` and
 * resumed by a message, the v0.3 method names; another tenant's task is not found.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, TaskState, type Message, type StreamResponse, type Task } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
  type Client,
} from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport, isLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { startKeyedStack, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
let acme: string;
let beta: string;

const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';

beforeAll(async () => {
  // The agent echoes the message; a message asking it to hang gets no answer until cancelled.
  model = await startModelServer({
    script: (r) => (lastUser(r).includes('hang') ? { hang: true } : { content: `echo: ${lastUser(r)}` }),
  });
  const keyed = await startKeyedStack({
    pools: ['sense', 'plan', 'tool'],
    env: { OPENAI_BASE_URL: model.url, TETRALOOP_MODEL_MAX_RETRIES: '0' },
    tenants: ['acme', 'beta'],
    scopes: ['sessions:read', 'sessions:write', 'runs:read', 'runs:write', 'signals:write'],
  });
  ({ stack } = keyed);
  [acme, beta] = [keyed.keys.acme!, keyed.keys.beta!];
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await model?.close();
});

/** `fetch` that sends the key, as the SDK's auth helper does it. */
const keyed = (key: string): typeof fetch =>
  createAuthenticatingFetchWithRetry(fetch, {
    headers: () => Promise.resolve({ authorization: `Bearer ${key}` }),
    shouldRetryWithHeaders: () => Promise.resolve(undefined),
  });

/** A client made the way the SDK's docs make one: from the agent's URL, its card read first. */
function factoryFor(key: string): ClientFactory {
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: keyed(key) })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: keyed(key) }),
    }),
  );
}
const clientFor = (key: string, agentId = 'main'): Promise<Client> =>
  factoryFor(key).createFromUrl(`${stack.url}/v1/a2a/${agentId}/`);

const userMessage = (text: string, extra: Record<string, unknown> = {}): SendMessageRequest =>
  SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra },
  });

const asTask = (result: Message | Task): Task => {
  expect('status' in result, JSON.stringify(result)).toBe(true);
  return result as Task;
};
const answerOf = (task: Task): string | undefined => {
  const part = task.artifacts.find((a) => a.artifactId === 'answer')?.parts[0]?.content;
  return part?.$case === 'text' ? part.value : undefined;
};

describe('A2A', () => {
  it('publishes the default agent’s card openly and each agent’s behind a key', async () => {
    const open = await new DefaultAgentCardResolver().resolve(stack.url);
    expect(open.name).toBe('main');
    expect(open.capabilities?.streaming).toBe(true);
    expect(open.supportedInterfaces.map((i) => [i.protocolBinding, i.protocolVersion, i.url])).toEqual([
      ['JSONRPC', '1.0', `${stack.url}/v1/a2a/main`],
      ['JSONRPC', '0.3', `${stack.url}/v1/a2a/main`],
    ]);
    expect(Object.keys(open.securitySchemes)).toEqual(['apiKey']);
    // Without an A2A-Version header a client is taken for a v0.3 one: the card of v0.3.
    const legacy = (await (await fetch(`${stack.url}/.well-known/agent-card.json`)).json()) as Record<
      string,
      unknown
    >;
    expect(isLegacyAgentCard(legacy)).toBe(true);
    expect(legacy).toMatchObject({ url: `${stack.url}/v1/a2a/main`, preferredTransport: 'JSONRPC' });

    const card = `${stack.url}/v1/a2a/main/.well-known/agent-card.json`;
    expect((await fetch(card)).status).toBe(401);
    const client = await clientFor(acme);
    expect((await client.getAgentCard()).name).toBe('main');
    expect(client.protocolVersion).toBe('1.0');
  });

  it('answers a message with its completed task, in the session its contextId names', async () => {
    const client = await clientFor(acme);
    const contextId = `a2a-${randomUUID()}`;
    const task = asTask(await client.sendMessage(userMessage('hello there', { contextId })));
    expect(task.contextId).toBe(contextId);
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(task)).toBe('echo: hello there');
    // The task is the run, in the session of its context.
    const run = await fetch(`${stack.url}/v1/runs/${task.id}`, {
      headers: { authorization: `Bearer ${acme}` },
    });
    expect(await run.json()).toMatchObject({ runId: task.id, sessionKey: contextId, status: 'succeeded' });

    const again = await client.getTask({ tenant: '', id: task.id });
    expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(again)).toBe('echo: hello there');
    // Another tenant's key finds no such task.
    const other = await clientFor(beta);
    await expect(other.getTask({ tenant: '', id: task.id })).rejects.toThrow(/no task/);
  });

  it('streams a message: the task, then its updates, the answer and the last status', async () => {
    const client = await clientFor(acme);
    const events: StreamResponse[] = [];
    for await (const e of client.sendMessageStream(userMessage('stream this'))) events.push(e);
    const kinds = events.map((e) => e.payload?.$case);
    expect(kinds[0]).toBe('task');
    expect(kinds.at(-1)).toBe('statusUpdate');
    const last = events.at(-1)!.payload!;
    expect(last.$case === 'statusUpdate' && last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const answer = events.flatMap((e) =>
      e.payload?.$case === 'artifactUpdate' &&
      e.payload.value.artifact?.artifactId === 'answer' &&
      e.payload.value.lastChunk
        ? [e.payload.value.artifact.parts[0]?.content]
        : [],
    );
    expect(answer).toEqual([{ $case: 'text', value: 'echo: stream this' }]);
  });

  it('cancels a task, and refuses to cancel it twice', async () => {
    const client = await clientFor(acme);
    const request = userMessage('please hang');
    request.configuration = {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      returnImmediately: true,
    };
    const task = asTask(await client.sendMessage(request));
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(task.status?.state);
    // Another tenant cannot cancel it.
    await expect(
      (await clientFor(beta)).cancelTask({ tenant: '', id: task.id, metadata: undefined }),
    ).rejects.toThrow(/no task/);
    const cancelled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await expect(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toThrow(
      /has ended/,
    );
  });

  it('shows a run waiting for a signal as input-required, and a message to the task delivers it', async () => {
    const submitted = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        graph: { nodes: [{ id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 600 }] },
      }),
    });
    const { runId } = (await submitted.json()) as { runId: string };
    const client = await clientFor(acme);
    // Followed with SubscribeToTask until it asks for input.
    let state: TaskState | undefined;
    for await (const e of client.resubscribeTask({ tenant: '', id: runId })) {
      if (e.payload?.$case === 'task') state = e.payload.value.status?.state;
      if (e.payload?.$case === 'statusUpdate') state = e.payload.value.status?.state;
    }
    expect(state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const waiting = await client.getTask({ tenant: '', id: runId });
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(waiting.status?.message?.parts[1]?.content).toMatchObject({
      $case: 'data',
      value: { awaiting: [{ nodeId: 'gate', signal: 'go' }] },
    });

    const done = asTask(
      await client.sendMessage(
        SendMessageRequest.fromJSON({
          message: {
            messageId: randomUUID(),
            role: 'ROLE_USER',
            taskId: runId,
            parts: [{ data: { approved: true, by: 'a2a' } }],
          },
        }),
      ),
    );
    expect(done.id).toBe(runId);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.artifacts.find((a) => a.artifactId === 'output')?.parts[0]?.content).toMatchObject({
      $case: 'data',
      value: { gate: { approved: true, by: 'a2a' } },
    });
  });

  it('speaks v0.3 for older clients: message/send and tasks/get', async () => {
    const legacy = new LegacyJsonRpcTransport({
      endpoint: `${stack.url}/v1/a2a/main`,
      fetchImpl: keyed(acme),
    });
    const task = asTask(await legacy.sendMessage(userMessage('old client')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(task)).toBe('echo: old client');
    const read = await legacy.getTask({ tenant: '', id: task.id });
    expect(answerOf(read)).toBe('echo: old client');
    // The wire: v0.3's method name, no A2A-Version header, v0.3's task shape.
    const raw = await fetch(`${stack.url}/v1/a2a/main`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tasks/get', params: { id: task.id } }),
    });
    expect(await raw.json()).toMatchObject({
      jsonrpc: '2.0',
      id: 7,
      result: { kind: 'task', id: task.id, status: { state: 'completed' } },
    });
  });

  it('refuses a call without a key, and names the field of a bad message', async () => {
    const res = await fetch(`${stack.url}/v1/a2a/main`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: randomUUID() } }),
    });
    expect(res.status).toBe(401);
    const client = await clientFor(acme);
    await expect(client.sendMessage(userMessage('x', { contextId: 'no spaces allowed' }))).rejects.toThrow(
      /message\.contextId/,
    );
    await expect(
      client.sendMessage(
        SendMessageRequest.fromJSON({
          message: {
            messageId: randomUUID(),
            role: 'ROLE_USER',
            parts: [{ url: 'https://example.test/f.pdf' }],
          },
        }),
      ),
    ).rejects.toThrow(/message\.parts\[0\]/);
  });
});
