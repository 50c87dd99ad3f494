/**
 * LangGraph's Agent Protocol under `/langgraph`, driven by `@langchain/langgraph-sdk`'s own
 * `Client` against a whole Tetraloop (API, sense, plan and tool pools) on a real Redis, with a
 * scripted OpenAI-compatible model that streams its answers: threads are sessions, runs stream
 * token deltas and their final state, wait, cancel; the store is the tenant's and bounded; a key
 * comes as `X-Api-Key` or a bearer token; another tenant's thread and run are not found.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@langchain/langgraph-sdk';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { startKeyedStack, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
let acme: string;
let beta: string;

const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';

/** A client as a LangGraph user makes one: the API key goes as `X-Api-Key`. */
const clientOf = (apiKey: string): Client =>
  new Client({ apiUrl: `${stack.url}/langgraph`, apiKey, callerOptions: { maxRetries: 0 } });

const userInput = (content: string) => ({ messages: [{ role: 'user', content }] });

/** The HTTP status an SDK call failed with. */
async function statusOf(call: Promise<unknown>): Promise<number> {
  try {
    await call;
  } catch (err) {
    return (err as { status?: number }).status ?? -1;
  }
  return 200;
}

beforeAll(async () => {
  // The agent echoes the user's last message; "hang" makes its model call wait until cancelled.
  model = await startModelServer({
    script: (r) => (lastUser(r).includes('hang') ? { hang: true } : { content: `echo: ${lastUser(r)}` }),
  });
  const keyed = await startKeyedStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_STORE_ITEMS_MAX: '3',
      TETRALOOP_STORE_VALUE_MAX_BYTES: '256',
    },
    tenants: ['acme', 'beta'],
    scopes: ['runs:read', 'runs:write', 'sessions:read', 'sessions:write'],
  });
  ({ stack } = keyed);
  [acme, beta] = [keyed.keys.acme!, keyed.keys.beta!];
});

afterAll(async () => {
  await stack?.close();
  await model?.close();
});

describe('assistants', () => {
  it('are the agents the tenant may run', async () => {
    const client = clientOf(acme);
    const found = await client.assistants.search();
    expect(found.map((a) => a.assistant_id)).toContain('main');
    const main = await client.assistants.get('main');
    expect(main).toMatchObject({ assistant_id: 'main', graph_id: 'main', version: 1 });
    expect(await client.assistants.getVersions('main')).toHaveLength(1);
    expect(await statusOf(client.assistants.get('nobody'))).toBe(404);
  });
});

describe('threads and runs', () => {
  it('streams a run with values and messages, waits on a second, reads state and history', async () => {
    const client = clientOf(acme);
    const thread = await client.threads.create({ metadata: { user: 'ada' } });
    expect(thread).toMatchObject({ status: 'idle', metadata: { user: 'ada' }, values: { messages: [] } });

    const parts: { event: string; data: unknown }[] = [];
    let created: { run_id: string; thread_id?: string } | undefined;
    for await (const part of client.runs.stream(thread.thread_id, 'main', {
      input: userInput('hello there'),
      streamMode: ['values', 'messages'],
      onRunCreated: (meta) => (created = meta),
    })) {
      parts.push(part);
    }
    expect(parts[0]!.event).toBe('metadata');
    const runId = (parts[0]!.data as { run_id: string }).run_id;
    expect(created).toEqual({ run_id: runId, thread_id: thread.thread_id });

    // Token deltas: the message grows, each partial a prefix of the next, up to the whole answer.
    const partials = parts
      .filter((p) => p.event === 'messages/partial')
      .map((p) => (p.data as { content: string }[])[0]!.content);
    expect(partials.length).toBeGreaterThan(0);
    partials.forEach((text, i) => expect(partials[i + 1] ?? 'echo: hello there').toContain(text));
    expect(partials.at(-1)).toBe('echo: hello there');
    expect(parts.some((p) => p.event === 'messages/metadata')).toBe(true);

    // The first values are the state the run starts from, the last the state it ends with.
    const values = parts.filter((p) => p.event === 'values').map((p) => p.data as { messages: unknown[] });
    expect(values[0]!.messages).toEqual([expect.objectContaining({ type: 'human', content: 'hello there' })]);
    expect(parts.at(-1)!.event).toBe('values');
    expect(values.at(-1)!.messages).toEqual([
      expect.objectContaining({ type: 'human', content: 'hello there' }),
      { type: 'ai', id: `run-${runId}`, content: 'echo: hello there' },
    ]);

    const waited = (await client.runs.wait(thread.thread_id, 'main', {
      input: userInput('second question'),
    })) as { messages: { type: string; content: string }[] };
    expect(waited.messages.map((m) => m.content)).toEqual([
      'hello there',
      'echo: hello there',
      'second question',
      'echo: second question',
    ]);

    const state = await client.threads.getState<{ messages: { content: string }[] }>(thread.thread_id);
    expect(state.values.messages.map((m) => m.content)).toEqual(waited.messages.map((m) => m.content));
    const history = await client.threads.getHistory<{ messages: unknown[] }>(thread.thread_id);
    expect(history.map((h) => h.values.messages.length)).toEqual([4, 2]);
    expect(history[0]!.parent_checkpoint?.checkpoint_id).toBe(history[1]!.checkpoint.checkpoint_id);

    const run = await client.runs.get(thread.thread_id, runId);
    expect(run).toMatchObject({
      run_id: runId,
      thread_id: thread.thread_id,
      assistant_id: 'main',
      status: 'success',
    });
    const found = await client.threads.search({ metadata: { user: 'ada' } });
    expect(found.map((t) => t.thread_id)).toContain(thread.thread_id);

    // Another tenant finds neither the thread nor its run; a bearer token works as X-Api-Key does.
    const other = clientOf(beta);
    expect(await statusOf(other.threads.get(thread.thread_id))).toBe(404);
    expect(await statusOf(other.runs.get(thread.thread_id, runId))).toBe(404);
    expect(await statusOf(other.threads.getState(thread.thread_id))).toBe(404);
    const bearer = new Client({
      apiUrl: `${stack.url}/langgraph`,
      apiKey: null,
      defaultHeaders: { authorization: `Bearer ${acme}` },
      callerOptions: { maxRetries: 0 },
    });
    expect((await bearer.threads.get(thread.thread_id)).thread_id).toBe(thread.thread_id);
    const anonymous = new Client({
      apiUrl: `${stack.url}/langgraph`,
      apiKey: null,
      callerOptions: { maxRetries: 0 },
    });
    expect(await statusOf(anonymous.threads.get(thread.thread_id))).toBe(401);

    await client.threads.delete(thread.thread_id);
    expect(await statusOf(client.threads.get(thread.thread_id))).toBe(404);
  });

  it('refuses a second run on a busy thread (reject), cancels a run: its status is interrupted', async () => {
    const client = clientOf(acme);
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'main', { input: userInput('please hang') });
    expect(['pending', 'running']).toContain(run.status);
    expect((await client.threads.get(thread.thread_id)).status).toBe('busy');
    expect(
      await statusOf(client.runs.create(thread.thread_id, 'main', { input: userInput('another') })),
    ).toBe(409);

    await client.runs.cancel(thread.thread_id, run.run_id, true);
    expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('interrupted');
    // Joining a cancelled run answers the thread's state: the question, no answer.
    const joined = (await client.runs.join(thread.thread_id, run.run_id)) as { messages: { type: string }[] };
    expect(joined.messages.map((m) => m.type)).toEqual(['human']);

    // Deleting a busy thread cancels its run: the thread is gone, the run over.
    const again = await client.runs.create(thread.thread_id, 'main', {
      input: userInput('hang again'),
      multitaskStrategy: 'enqueue',
    });
    await client.threads.delete(thread.thread_id);
    expect(await statusOf(client.threads.get(thread.thread_id))).toBe(404);
    const settled = await fetch(`${stack.url}/v1/runs/${again.run_id}/wait?timeoutMs=20000`, {
      headers: { authorization: `Bearer ${acme}` },
    });
    expect(((await settled.json()) as { status: string }).status).toBe('cancelled');
  });

  it('interrupts a running run with multitask_strategy "interrupt"', async () => {
    const client = clientOf(acme);
    const thread = await client.threads.create();
    const first = await client.runs.create(thread.thread_id, 'main', { input: userInput('hang on') });
    const second = (await client.runs.wait(thread.thread_id, 'main', {
      input: userInput('next'),
      multitaskStrategy: 'interrupt',
    })) as { messages: { content: string }[] };
    expect(second.messages.at(-1)!.content).toBe('echo: next');
    expect((await client.runs.get(thread.thread_id, first.run_id)).status).toBe('interrupted');
  });

  it('runs statelessly, streaming updates, events and message tuples', async () => {
    const client = clientOf(acme);
    const parts: { event: string; data: unknown }[] = [];
    for await (const part of client.runs.stream(null, 'main', {
      input: userInput('no thread'),
      streamMode: ['updates', 'events', 'messages-tuple'],
    })) {
      parts.push(part);
    }
    const events = new Set(parts.map((p) => p.event));
    expect(events).toEqual(new Set(['metadata', 'updates', 'events', 'messages']));
    const tuples = parts
      .filter((p) => p.event === 'messages')
      .map((p) => p.data as [{ content: string }, unknown]);
    expect(tuples.map(([chunk]) => chunk.content).join('')).toBe('echo: no thread');
    expect(
      parts.some(
        (p) => p.event === 'events' && (p.data as { event: string }).event === 'on_chat_model_stream',
      ),
    ).toBe(true);

    const waited = (await client.runs.wait(null, 'main', { input: userInput('once more') })) as {
      messages: { type: string; content: string }[];
    };
    expect(waited.messages).toEqual([
      expect.objectContaining({ type: 'human', content: 'once more' }),
      expect.objectContaining({ type: 'ai', content: 'echo: once more' }),
    ]);
  });

  it('names the field of bad input', async () => {
    const client = clientOf(acme);
    const thread = await client.threads.create();
    const res = await fetch(`${stack.url}/langgraph/threads/${thread.thread_id}/runs/wait`, {
      method: 'POST',
      headers: { 'x-api-key': acme, 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'main', input: { messages: [] }, interrupt_before: ['agent'] }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { issues: { path: string }[] } };
    expect(body.error.issues.map((i) => i.path)).toEqual(['interrupt_before']);
  });
});

describe('the store', () => {
  it('puts, gets, searches, lists and deletes items, per tenant and bounded', async () => {
    const client = clientOf(acme);
    await client.store.putItem(['users', 'ada'], 'prefs', { theme: 'dark' });
    await client.store.putItem(['users', 'ada'], 'notes', { text: 'likes tea' });
    await client.store.putItem(['users', 'bob'], 'prefs', { theme: 'light' });

    const item = await client.store.getItem(['users', 'ada'], 'prefs');
    expect(item).toMatchObject({ namespace: ['users', 'ada'], key: 'prefs', value: { theme: 'dark' } });
    expect(Date.parse(item!.createdAt)).not.toBeNaN();
    expect((item as unknown as { created_at: string }).created_at).toBe(item!.createdAt);

    const dark = await client.store.searchItems(['users'], { filter: { theme: 'dark' } });
    expect(dark.items.map((i) => i.key)).toEqual(['prefs']);
    expect((await client.store.searchItems(['users', 'ada'])).items).toHaveLength(2);
    expect((await client.store.listNamespaces()).namespaces).toEqual([
      ['users', 'ada'],
      ['users', 'bob'],
    ]);

    // Bounded: a fourth item is refused, an existing one may be replaced; a big value is refused.
    expect(await statusOf(client.store.putItem(['users', 'cy'], 'prefs', { theme: 'dim' }))).toBe(409);
    await client.store.putItem(['users', 'ada'], 'prefs', { theme: 'solar' });
    expect((await client.store.getItem(['users', 'ada'], 'prefs'))!.value).toEqual({ theme: 'solar' });
    expect(await statusOf(client.store.putItem(['users', 'ada'], 'big', { text: 'x'.repeat(300) }))).toBe(
      413,
    );

    // Another tenant's store is its own.
    expect((await clientOf(beta).store.searchItems(['users'])).items).toEqual([]);
    expect(await statusOf(clientOf(beta).store.getItem(['users', 'ada'], 'prefs'))).toBe(404);

    await client.store.deleteItem(['users', 'ada'], 'prefs');
    expect(await statusOf(client.store.getItem(['users', 'ada'], 'prefs'))).toBe(404);
  });
});
