/**
 * The scripted OpenAI-compatible server: JSON and streamed replies, errors, hangs, sequence,
 * token estimates, and (since `openai` is a dependency) the real SDK against it.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  estimateTokens,
  sequence,
  startModelServer,
  type ChatRequest,
  type ModelServer,
} from './support/model-server.js';

let server: ModelServer;

beforeAll(async () => {
  server = await startModelServer({ script: () => ({ content: 'unused' }) });
});
afterAll(async () => {
  await server?.close();
});
beforeEach(() => {
  server.requests.length = 0;
});

const chat = (body: object): Promise<Response> =>
  fetch(`${server.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const user = (content: string): ChatRequest => ({ model: 'm', messages: [{ role: 'user', content }] });

interface Chunk {
  object: string;
  choices: {
    delta: {
      role?: string;
      content?: string | null;
      tool_calls?: { index: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason: string | null;
  }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

/** Parses an SSE body into its JSON chunks, checking it ends with [DONE]. */
function parseEvents(text: string): Chunk[] {
  const data = text
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice('data: '.length));
  expect(data.at(-1)).toBe('[DONE]');
  return data.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
}

describe('model server', () => {
  it('answers a non-streamed completion with usage and records the request', async () => {
    server.setScript(() => ({ content: 'hello there', usage: { promptTokens: 11, completionTokens: 3 } }));
    const res = await chat(user('hi'));
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hello there' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 },
    });
    expect(server.requests).toEqual([user('hi')]);
  });

  it('answers tool calls with ids, stringified arguments and estimated usage', async () => {
    server.setScript(() => ({ content: '', toolCalls: [{ name: 'search', arguments: { q: 'x' } }] }));
    const request = user('abcdefgh');
    const body = (await (await chat(request)).json()) as {
      choices: { message: { content: string | null; tool_calls: unknown[] }; finish_reason: string }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    const choice = body.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^call_\d+$/),
        type: 'function',
        function: { name: 'search', arguments: '{"q":"x"}' },
      },
    ]);
    expect(body.usage.prompt_tokens).toBe(estimateTokens(request));
    expect(body.usage.completion_tokens).toBe(Math.ceil('{"q":"x"}'.length / 4));
  });

  it('streams content and tool calls in chunks that reassemble, then usage, then [DONE]', async () => {
    const content = 'The quick brown fox jumps over the lazy dog';
    const args = { city: 'Paris', days: [1, 2, 3], note: 'a fairly long argument string' };
    server.setScript(() => ({ content, toolCalls: [{ name: 'weather', arguments: args }] }));
    const res = await chat({ ...user('hi'), stream: true, stream_options: { include_usage: true } });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const chunks = parseEvents(await res.text());

    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const deltas = chunks.flatMap((c) => c.choices.map((choice) => choice.delta));
    const contentPieces = deltas.map((d) => d.content ?? '').filter((p) => p !== '');
    expect(contentPieces.length).toBeGreaterThan(1);
    expect(contentPieces.join('')).toBe(content);

    const callDeltas = deltas.flatMap((d) => d.tool_calls ?? []);
    expect(callDeltas[0]).toMatchObject({
      index: 0,
      id: expect.stringMatching(/^call_/),
      function: { name: 'weather' },
    });
    const argPieces = callDeltas.map((d) => d.function?.arguments ?? '').filter((p) => p !== '');
    expect(argPieces.length).toBeGreaterThan(1);
    expect(JSON.parse(argPieces.join(''))).toEqual(args);

    const [finish, usage] = chunks.slice(-2);
    expect(finish!.choices[0]).toMatchObject({ delta: {}, finish_reason: 'tool_calls' });
    expect(usage!.choices).toEqual([]);
    expect(usage!.usage).toMatchObject({ prompt_tokens: estimateTokens(user('hi')) });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it('sends no usage chunk unless include_usage is asked for', async () => {
    server.setScript(() => ({ content: 'short' }));
    const chunks = parseEvents(await (await chat({ ...user('hi'), stream: true })).text());
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks.every((c) => c.choices.length === 1 && !('usage' in c))).toBe(true);
  });

  it('answers an error reply with its status, OpenAI error body and headers', async () => {
    server.setScript(() => ({
      status: 429,
      error: { message: 'slow down', type: 'rate_limit' },
      headers: { 'retry-after': '2' },
    }));
    const res = await chat(user('hi'));
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(await res.json()).toEqual({
      error: { message: 'slow down', type: 'rate_limit', code: null, param: null },
    });
  });

  it('waits the latency before answering', async () => {
    server.setScript(() => ({ content: 'late', latencyMs: 150 }));
    const start = performance.now();
    await (await chat(user('hi'))).json();
    expect(performance.now() - start).toBeGreaterThanOrEqual(140);
  });

  it('hangs until the client gives up', async () => {
    server.setScript(() => ({ hang: true }));
    const client = new AbortController();
    const answer = fetch(`${server.url}/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(user('hi')),
      signal: client.signal,
    });
    // The client gives up once the server holds its request, not after a guessed time.
    await server.received((r) => r.messages[0]?.content === 'hi');
    client.abort();
    await expect(answer).rejects.toThrow();
    expect(server.requests).toHaveLength(1);
  });

  it('plays a sequence, repeating its last reply, and passes the request index', async () => {
    const indexes: number[] = [];
    const replies = sequence({ content: 'one' }, { status: 500 }, { content: 'last' });
    server.setScript((request, index, headers) => {
      indexes.push(index);
      return replies(request, index, headers);
    });
    const answers: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await chat(user(`q${i}`));
      answers.push(
        res.ok
          ? ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message
              .content
          : res.status,
      );
    }
    expect(answers).toEqual(['one', 500, 'last', 'last']);
    expect(indexes).toEqual([0, 1, 2, 3]);
    expect(server.requests.map((r) => r.messages[0]!.content)).toEqual(['q0', 'q1', 'q2', 'q3']);
  });

  it('lists one model, 404s unknown routes and 400s bad JSON', async () => {
    const models = (await (await fetch(`${server.url}/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['scripted']);
    expect((await fetch(`${server.url}/embeddings`, { method: 'POST' })).status).toBe(404);
    const bad = await fetch(`${server.url}/chat/completions`, { method: 'POST', body: '{nope' });
    expect(bad.status).toBe(400);
    expect(server.requests).toHaveLength(0);
  });

  it('estimates tokens from contents, tool call arguments and tools', () => {
    const request: ChatRequest = {
      model: 'm',
      messages: [
        { role: 'system', content: 'abcd' }, // 4
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }], // 7
        },
        { role: 'tool', content: 'xy', tool_call_id: 'call_1' }, // 2
      ],
      tools: [{ type: 'function' }], // 21: [{"type":"function"}]
    };
    expect(JSON.stringify(request.tools)).toHaveLength(21);
    expect(estimateTokens(request)).toBe(Math.ceil((4 + 7 + 2 + 21) / 4));
    expect(estimateTokens(user('a'))).toBe(1);
    expect(estimateTokens({ model: 'm', messages: [] })).toBe(0);
  });
});

describe('model server with the openai SDK', () => {
  const client = (): OpenAI => new OpenAI({ apiKey: 'test', baseURL: server.url, maxRetries: 0 });

  it('serves chat.completions.create, plain and streamed', async () => {
    server.setScript(
      sequence(
        { content: 'plain answer', usage: { promptTokens: 5, completionTokens: 2 } },
        { content: 'streamed answer', toolCalls: [{ name: 'lookup', arguments: { id: 7 } }] },
      ),
    );
    const plain = await client().chat.completions.create({
      model: 'scripted',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(plain.choices[0]!.message.content).toBe('plain answer');
    expect(plain.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 });

    const stream = await client().chat.completions.create({
      model: 'scripted',
      messages: [{ role: 'user', content: 'again' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let args = '';
    let name = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      content += choice?.delta.content ?? '';
      for (const call of choice?.delta.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
      finish = choice?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect({ content, name, args: JSON.parse(args) as unknown, finish }).toEqual({
      content: 'streamed answer',
      name: 'lookup',
      args: { id: 7 },
      finish: 'tool_calls',
    });
    expect(usage?.prompt_tokens).toBe(Math.ceil('again'.length / 4));

    // The SDK's own accumulator (used by .stream() helpers) rebuilds the same message.
    server.setScript(() => ({ content: 'x', toolCalls: [{ name: 'lookup', arguments: { id: 8 } }] }));
    const final = await client()
      .chat.completions.stream({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }] })
      .finalChatCompletion();
    expect(final.choices[0]!.message).toMatchObject({
      content: 'x',
      tool_calls: [{ type: 'function', function: { name: 'lookup', arguments: '{"id":8}' } }],
    });
  });

  it('surfaces scripted errors as APIError with status and retry-after', async () => {
    server.setScript(() => ({
      status: 429,
      error: { message: 'slow down' },
      headers: { 'retry-after': '1' },
    }));
    const error = await client()
      .chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(429);
    expect(apiError.message).toContain('slow down');
    expect(apiError.headers?.get('retry-after')).toBe('1');
  });
});
