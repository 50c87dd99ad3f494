/**
 * An agent calling a custom tool whose code its process does not have: the agent loop runs on the
 * tool pool of this process (the default queue, no tool module), the tools of
 * `fixtures/tools/remote-tools.ts` only on a real `tetraloop worker --pool tool --queues remote
 * --tools <module>` process. Each call goes to the `remote` queue as a job, runs there as a tool
 * node's call would, and its outcome comes back to the agent.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { RemoteToolCalls } from '@tetraloop/core/executor';
import {
  DEFAULT_JOB_RETENTION,
  queueLayout,
  toolQueueName,
  type ToolCallJobData,
} from '@tetraloop/core/queues';
import { connectRedis, whenReady, type RedisClient } from '@tetraloop/core/runtime';
import type { CustomTool } from '@tetraloop/core/tools';
import {
  scriptedModelEnv,
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { spawnToolWorker, type ToolWorker } from './support/processes.js';
import { postRun, putToolSecret, readEvents, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

const MODULE = fileURLToPath(new URL('./fixtures/tools/remote-tools.ts', import.meta.url));
const KEY = randomBytes(32).toString('base64');
const TOKEN = `remote-${randomBytes(8).toString('hex')}`;
const MARK = 'remote-worker';

let stack: Stack;
let loopback: ToolServer;
let model: ModelServer;
let worker: ToolWorker;
let redis: RedisClient;
/** What the scripted model answers an agent's turn. */
let agent: (request: ChatRequest) => ScriptedReply = () => ({ content: 'ok' });

beforeAll(async () => {
  loopback = await startToolServer();
  model = await startModelServer({ script: (request) => agent(request) });
  // A tool pool here without the module: the agent loops run in this process.
  stack = await startStack({
    pools: ['plan', 'tool'],
    env: {
      ...scriptedModelEnv(model),
      TETRALOOP_SECRET_KEY: KEY,
      TETRALOOP_TOOL_HEARTBEAT_MS: '500',
    },
  });
  redis = connectRedis(stack.env.REDIS_URL!, 'worker', 'custom-tools-remote-test');
  await whenReady(redis);
  worker = spawnToolWorker(MODULE, 'remote', {
    ...stack.env,
    TOOL_SERVER_URL: loopback.url,
    REMOTE_WORKER_MARK: MARK,
  });
  await worker.ready;
  expect(await putToolSecret(stack.url, 'REMOTE_TOKEN', TOKEN, ['remote.whoami'])).toBe(204);
}, 60_000);
afterAll(async () => {
  await worker?.kill('SIGKILL');
  redis?.disconnect();
  await stack?.close();
  await model?.close();
  await loopback?.close();
});

/** An agent loop that calls `tools` with `calls` on its first turn, then answers. */
const agentGraph = (prompt: string, tools: string[]) => ({
  nodes: [{ id: 'ask', kind: 'loop', maxIterations: 3, body: { agent: { prompt, tools } } }],
});

/** The tool results the model was shown, in order, as the agent sent them. */
const toolResultsShown = (requests: readonly ChatRequest[]): unknown[] =>
  (requests.find((r) => r.messages.some((m) => m.role === 'tool'))?.messages ?? [])
    .filter((m) => m.role === 'tool')
    .map((m) => JSON.parse(String(m.content)) as unknown);

/** Scripts the agent: the first turn asks for `calls`, the next answers. */
function scriptAgent(calls: { name: string; arguments: unknown }[]): void {
  agent = (request) =>
    request.messages.some((m) => m.role === 'tool') ? { content: 'done' } : { content: '', toolCalls: calls };
}

async function runAgent(prompt: string, tools: string[]): Promise<RunDocument> {
  const posted = await postRun(stack.url, { graph: agentGraph(prompt, tools) });
  expect(posted.status, JSON.stringify(posted.body)).toBe(202);
  return waitFor(stack.url, posted.body.runId as string, 30_000);
}

describe('an agent calling a custom tool only another worker process has', () => {
  it('runs the call on that process, with its secret and progress, and gives the agent the output', async () => {
    scriptAgent([{ name: 'remote__whoami', arguments: { tag: 'first' } }]);
    const before = model.requests.length;
    const doc = await runAgent('Who runs this?', ['remote.whoami']);
    expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
    const [shown] = toolResultsShown(model.requests.slice(before));
    expect(shown).toEqual({ tag: 'first', pid: worker.child.pid, mark: MARK, tokenLength: TOKEN.length });
    expect(worker.child.pid).not.toBe(process.pid);
    const [hit] = loopback.hitsOf('whoami-first');
    expect(hit?.headers['idempotency-key']).toMatch(/.+/);
    expect(hit?.headers['x-attempt']).toBe('1');
    // Its progress is the calling node's; the secret reaches no event and no document.
    const events = await readEvents(stack.url, doc.runId);
    expect(events.find((e) => e.data.type === 'node.progress')?.data).toMatchObject({
      nodeId: 'ask',
      data: { fraction: 0.5, message: 'asked by ask' },
    });
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    expect(JSON.stringify(doc)).not.toContain(TOKEN);

    // The call's job is kept a while, by a deterministic id: the same call sent again (a
    // redelivered agent turn) reads its answer back and does not run the tool again (the run has
    // ended: a second run would answer `aborted`).
    const prefix = queueLayout(stack.prefix, { clustered: false, shards: 1 }).shards[0]!;
    const queue = new Queue(toolQueueName('remote'), { connection: redis, prefix });
    try {
      const [job] = await queue.getCompleted();
      expect(job?.name).toBe('call');
      const data = job!.data as ToolCallJobData;
      expect(data).toMatchObject({ runId: doc.runId, nodeId: 'ask', attempt: 1, tool: 'remote.whoami' });
      const remote = new RemoteToolCalls({
        queues: {
          retention: DEFAULT_JOB_RETENTION,
          shardOf: () => Promise.resolve({ toolQueue: () => queue } as never),
        },
        connection: redis,
      });
      try {
        const again = await remote.call(
          { name: 'remote.whoami', custom: { queue: 'remote' } } as CustomTool,
          { ...data, deadlineAt: undefined } as never,
          { runSignal: new AbortController().signal },
        );
        expect(again).toEqual({ ok: true, output: shown });
        expect(loopback.hitsOf('whoami-first')).toHaveLength(1);
      } finally {
        await remote.close();
      }
    } finally {
      await queue.close();
    }
  });

  it('gives the agent a tool failure as the tool worker classified it', async () => {
    scriptAgent([
      { name: 'remote__fail', arguments: { how: 'validation' } },
      { name: 'remote__fail', arguments: { how: 'server' } },
      { name: 'remote__fail', arguments: { how: 'bad-output' } },
    ]);
    const before = model.requests.length;
    const doc = await runAgent('Fail three ways', ['remote.fail']);
    expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
    expect(toolResultsShown(model.requests.slice(before))).toEqual([
      { error: { code: 'validation', message: 'failed as asked (validation)' } },
      { error: { code: 'server', message: 'failed as asked (server)' } },
      {
        error: {
          code: 'validation',
          message: expect.stringContaining('remote.fail returned an output that does not match its schema'),
        },
      },
    ]);
  });

  it('runs a loop node’s tool body on that process too, once per iteration', async () => {
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          {
            id: 'poll',
            kind: 'loop',
            maxIterations: 2,
            body: { tool: 'remote.whoami', args: { tag: 'loop' } },
          },
        ],
      },
    });
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const doc = await waitFor(stack.url, posted.body.runId as string, 30_000);
    expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
    expect(JSON.stringify(doc.nodes.poll)).toContain(`"pid":${worker.child.pid}`);
    // Each iteration is a call of its own, with a key of its own.
    const keys = loopback.hitsOf('whoami-loop').map((h) => h.idempotencyKey);
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(2);
  });

  it('aborts the remote call’s ctx.signal when the run is cancelled', async () => {
    scriptAgent([{ name: 'remote__hold', arguments: { tag: 'cancel' } }]);
    const posted = await postRun(stack.url, { graph: agentGraph('Hold on', ['remote.hold']) });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await expect.poll(() => loopback.hitsOf('waiting-cancel').length, { timeout: 20_000 }).toBe(1);
    const cancel = await fetch(`${stack.url}/v1/runs/${runId}/cancel`, { method: 'POST' });
    expect(cancel.status).toBeLessThan(300);
    const cancelled = await waitFor(stack.url, runId, 30_000);
    expect(cancelled.status).toBe('cancelled');
    await expect
      .poll(() => loopback.hitsOf('stopped-cancel')[0]?.headers['x-reason'], { timeout: 10_000 })
      .toBe('run aborted');
  });

  it('fails the node at once, naming the queue, when no live worker serves the tool', async () => {
    await worker.kill('SIGTERM');
    await expect
      .poll(
        async () => {
          const res = await fetch(`${stack.url}/v1/tools`);
          const { tools } = (await res.json()) as { tools: { name: string; workers?: number }[] };
          return tools.find((t) => t.name === 'remote.whoami')?.workers;
        },
        { timeout: 10_000 },
      )
      .toBe(0);
    scriptAgent([{ name: 'remote__whoami', arguments: { tag: 'unserved' } }]);
    const turns = model.requests.length;
    const doc = await runAgent('Who runs this now?', ['remote.whoami']);
    expect(doc.status).toBe('failed');
    expect(doc.nodes.ask).toMatchObject({
      status: 'failed',
      error: {
        code: 'internal',
        reason: 'tool_unserved',
        message: expect.stringContaining('no live worker serves its queue "remote"'),
      },
    });
    // One model turn asked for the tool; the failure did not go back to the model.
    expect(model.requests.length - turns).toBe(1);
    expect(loopback.hitsOf('whoami-unserved')).toHaveLength(0);
  });
});
