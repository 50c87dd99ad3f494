/**
 * The harness's policies applied to custom tools, on a real tool worker process
 * (`tetraloop worker --pool tool --tools fixtures/tools/policy-tools.ts --queues policy,default`,
 * with the fixture plugin `custom-tool-guard.mjs`) and the plan and reflect pools in this process:
 * a custom tool that keeps failing gets a hard lesson like a host does; a `before_tool_call` hook
 * blocks or rewrites its calls; an agent's tool allowlist keeps it from the agent's graphs, plans
 * and agent loops.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { lessonId, type Lesson } from '@tetraloop/core/memory';
import { connectRedis, whenReady } from '@tetraloop/core/runtime';
import { probeKey } from '@tetraloop/core/state';
import {
  isPlannerCall,
  scriptedModelEnv,
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { spawnToolWorker, type ToolWorker } from './support/processes.js';
import { postRun, runToEnd, startStack, withReflection, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

const MODULE = fileURLToPath(new URL('./fixtures/tools/policy-tools.ts', import.meta.url));
const GUARD = fileURLToPath(new URL('./fixtures/plugins/custom-tool-guard.mjs', import.meta.url));
/** An agent whose allowlist has `svc.echo` and `json`, not `svc.fetch`. */
const NARROW = 'narrow';

let stack: Stack;
let server: ToolServer;
let model: ModelServer;
let worker: ToolWorker;
let redis: ReturnType<typeof connectRedis>;
let planner: (request: ChatRequest) => ScriptedReply = () => ({ content: '{}' });
let agent: (request: ChatRequest) => ScriptedReply = () => ({ content: 'ok' });

beforeAll(async () => {
  server = await startToolServer();
  model = await startModelServer({
    script: (request) => (isPlannerCall(request) ? planner(request) : agent(request)),
  });
  // No tool pool here: every node, agent loops included, runs on the worker process below.
  stack = await startStack({
    pools: ['plan', 'reflect'],
    env: {
      ...scriptedModelEnv(model),
      // Lessons are read on every call, so a test sees a change at once; a lesson takes effect at the
      // reflection that finds it (no probation: what this file tests is a lesson's effect on a custom
      // tool, and test/reflect.int.test.ts the probation).
      TETRALOOP_LESSON_REFRESH_MS: '0',
      TETRALOOP_LESSON_PROBATION_RUNS: '0',
      TETRALOOP_TOOL_HEARTBEAT_MS: '500',
      TETRALOOP_AGENT_TOOLS: JSON.stringify({ [NARROW]: ['svc.echo', 'json'] }),
    },
  });
  redis = connectRedis(stack.env.REDIS_URL!, 'client', 'custom-tools-policy-test');
  await whenReady(redis);
  worker = spawnToolWorker(MODULE, 'policy,default', {
    ...stack.env,
    TOOL_SERVER_URL: server.url,
    TETRALOOP_PLUGINS: GUARD,
  });
  await worker.ready;
}, 60_000);
afterAll(async () => {
  await worker?.kill('SIGTERM');
  redis?.disconnect();
  await stack?.close();
  await model?.close();
  await server?.close();
});

const fetchNode = (node: string, status?: number) => ({
  id: 'fetch',
  kind: 'tool',
  tool: 'svc.fetch',
  args: { node, ...(status === undefined ? {} : { status }) },
});
const asAgent = (agentId: string, ...nodes: unknown[]) => ({ agentId, graph: { nodes } });

const lessonsOf = async (agentId: string, status?: string): Promise<{ version: number; lessons: Lesson[] }> =>
  (await fetch(`${stack.url}/v1/agents/${agentId}/lessons${status ? `?status=${status}` : ''}`).then((r) =>
    r.json(),
  )) as { version: number; lessons: Lesson[] };

/** The model requests made while `act` ran. */
async function requestsDuring(act: () => Promise<unknown>): Promise<ChatRequest[]> {
  const before = model.requests.length;
  await act();
  return model.requests.slice(before);
}

describe('a custom tool that keeps failing', () => {
  it('gets a hard lesson by tool: its calls refused without running, the planner told, a probe lets it back', async () => {
    const agentId = 'records';
    // Three failed runs in a row trigger a reflection of the agent.
    const failed = await withReflection(stack, agentId, async () => {
      const docs: RunDocument[] = [];
      for (let i = 0; i < 3; i++)
        docs.push(await runToEnd(stack.url, asAgent(agentId, fetchNode(`down${i}`, 503))));
      return docs;
    });
    for (const doc of failed)
      expect(doc.nodes.fetch).toMatchObject({
        status: 'failed',
        error: { code: 'server' },
        attempts: [{ tool: 'svc.fetch', target: 'svc.fetch' }],
      });
    const scope = { tool: 'svc.fetch', host: 'svc.fetch' };
    const id = lessonId(agentId, 'service-down', scope);
    const { lessons } = await lessonsOf(agentId);
    expect(lessons).toEqual([
      expect.objectContaining({ id, kind: 'hard', rule: 'service-down', status: 'active', cases: 3, scope }),
    ]);
    const statement = lessons[0]!.statement;
    expect(statement).toMatch(/^svc\.fetch is down: 3 of 3 recent calls failed/);

    // A probe just went out: the next call is refused before the tool's code runs.
    await redis.set(probeKey(stack.prefix, agentId, id), '1', 'PX', 60_000);
    const refused = await runToEnd(stack.url, asAgent(agentId, fetchNode('refused')));
    expect(refused.nodes.fetch).toMatchObject({
      status: 'failed',
      error: { code: 'blocked_by_lesson', lessonId: id },
      attempts: [{ tool: 'svc.fetch', target: 'svc.fetch', lessons: [id] }],
    });
    expect(server.hitsOf('refused')).toHaveLength(0);
    // Another agent's calls of the tool are not touched by it.
    const other = await runToEnd(stack.url, asAgent('other', fetchNode('other')));
    expect(other.status).toBe('succeeded');

    // The planner is told the lesson, and a plan calling the tool is refused and repaired.
    planner = (request) =>
      JSON.stringify(request.messages).includes(`blocked by lesson ${id}`)
        ? {
            content: JSON.stringify({
              nodes: [{ id: 'note', kind: 'tool', tool: 'json', args: { value: 1 } }],
            }),
          }
        : { content: JSON.stringify({ nodes: [fetchNode('planned')] }) };
    let planned: RunDocument | undefined;
    const asked = await requestsDuring(async () => {
      planned = await runToEnd(stack.url, { agentId, task: 'fetch the record planned' });
    });
    expect(planned?.status, JSON.stringify(planned?.nodes)).toBe('succeeded');
    const [first, repair] = asked.filter(isPlannerCall);
    expect(first?.messages.find((m) => m.role === 'system')?.content).toContain(statement);
    expect(JSON.stringify(repair?.messages)).toContain(`blocked by lesson ${id}`);
    expect(server.hitsOf('planned')).toHaveLength(0);

    // The probe interval passed: one call goes through, finds the tool working, retires the lesson.
    await redis.del(probeKey(stack.prefix, agentId, id));
    const probe = await runToEnd(stack.url, asAgent(agentId, fetchNode('probe')));
    expect(probe.status).toBe('succeeded');
    expect(server.hitsOf('probe')).toHaveLength(1);
    expect((await lessonsOf(agentId, 'retired')).lessons.map((l) => l.id)).toEqual([id]);
  }, 90_000);
});

describe('a before_tool_call hook on a custom tool', () => {
  const echo = (id: string, text: string) => ({
    id,
    kind: 'tool',
    tool: 'svc.echo',
    args: { node: id, text },
  });

  it('blocks a call: the tool does not run and the node fails validation with the hook’s reason', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [echo('blocked', 'forbidden')] } });
    expect(doc.status).toBe('failed');
    expect(doc.nodes.blocked).toMatchObject({
      status: 'failed',
      error: { code: 'validation', message: 'blocked: svc.echo may not say that' },
    });
    expect(server.hitsOf('blocked')).toHaveLength(0);
  });

  it('rewrites a call: the tool runs once with the rewritten args', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [echo('rewritten', 'draft')] } });
    expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
    expect(doc.nodes.rewritten).toMatchObject({
      output: { text: 'rewritten' },
      input: { node: 'rewritten', text: 'rewritten' },
    });
    expect(server.hitsOf('rewritten')).toHaveLength(1);
  });

  it('checks rewritten args against the tool’s input schema before it runs', async () => {
    const doc = await runToEnd(stack.url, { graph: { nodes: [echo('oversize', 'oversize')] } });
    expect(doc.nodes.oversize).toMatchObject({ status: 'failed', error: { code: 'validation' } });
    expect(server.hitsOf('oversize')).toHaveLength(0);
  });
});

describe('an agent whose allowlist leaves a custom tool out', () => {
  const agentLoop = (tools?: string[]) => ({
    id: 'ask',
    kind: 'loop',
    maxIterations: 2,
    body: { agent: { prompt: 'Fetch the record', ...(tools ? { tools } : {}) } },
  });
  const offered = (requests: ChatRequest[]): string[] =>
    (requests.find((r) => !isPlannerCall(r))?.tools ?? []).map(
      (t) => (t as { function: { name: string } }).function.name,
    );

  it('is refused a graph naming it, 400 at the field', async () => {
    const node = await postRun(stack.url, asAgent(NARROW, fetchNode('n')));
    expect(node.status).toBe(400);
    expect(JSON.stringify(node.body)).toContain('graph.nodes.0.tool');
    expect(JSON.stringify(node.body)).toContain('tool \\"svc.fetch\\" is not allowed for this agent');
    const loop = await postRun(stack.url, asAgent(NARROW, agentLoop(['svc.echo', 'svc.fetch'])));
    expect(loop.status).toBe(400);
    expect(JSON.stringify(loop.body)).toContain('graph.nodes.0.body.agent.tools.1');
    // The tool is known and allowed to other agents.
    expect((await postRun(stack.url, asAgent('other', fetchNode('n')))).status).toBe(202);
  });

  it('is not offered it in an agent loop, and its call of it does not run', async () => {
    agent = (request) =>
      request.messages.some((m) => m.role === 'tool')
        ? { content: 'done' }
        : { content: '', toolCalls: [{ name: 'svc__fetch', arguments: { node: 'unoffered' } }] };
    try {
      for (const request of [
        { agentId: NARROW, task: 'Fetch the record', mode: 'loop' },
        asAgent(NARROW, agentLoop()),
      ]) {
        let doc: RunDocument | undefined;
        const asked = await requestsDuring(async () => {
          doc = await runToEnd(stack.url, request);
        });
        expect(doc?.status, JSON.stringify(doc?.nodes)).toBe('succeeded');
        const names = offered(asked);
        expect(names).toContain('svc__echo');
        expect(names).not.toContain('svc__fetch');
        // The model named it all the same: it was told the tool is not available.
        const answer = asked.at(-1)?.messages.find((m) => m.role === 'tool')?.content;
        expect(answer).toContain('tool \\"svc__fetch\\" is not available');
      }
      expect(server.hitsOf('unoffered')).toHaveLength(0);
    } finally {
      agent = () => ({ content: 'ok' });
    }
  });

  it('is not shown it by the planner, whose plan naming it is refused', async () => {
    planner = (request) =>
      JSON.stringify(request.messages).includes('not allowed for this agent')
        ? {
            content: JSON.stringify({
              nodes: [{ id: 'say', kind: 'tool', tool: 'svc.echo', args: { node: 'said', text: 'hi' } }],
            }),
          }
        : { content: JSON.stringify({ nodes: [fetchNode('planned-narrow')] }) };
    let doc: RunDocument | undefined;
    const asked = await requestsDuring(async () => {
      doc = await runToEnd(stack.url, { agentId: NARROW, task: 'fetch the record' });
    });
    expect(doc?.status, JSON.stringify(doc?.nodes)).toBe('succeeded');
    const [first, repair] = asked.filter(isPlannerCall);
    expect(JSON.stringify(first)).toContain('svc.echo');
    expect(JSON.stringify(first)).not.toContain('svc.fetch');
    expect(JSON.stringify(repair?.messages)).toContain('tool \\"svc.fetch\\" is not allowed for this agent');
    expect(server.hitsOf('planned-narrow')).toHaveLength(0);
  });
});
