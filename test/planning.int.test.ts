/**
 * The plan loop and model nodes against a scripted OpenAI-compatible server, through the real
 * `openai` SDK: planning with structured output, repair, rejection, minimal context, usage,
 * replanning, stale jobs, and the classic loop.
 */
import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeJobId } from '@tetraloop/core/queues';
import { MemoryStore } from '@tetraloop/core/state';
import { lessonRecord } from './support/lessons.js';
import type { ChatRequest, ModelServer } from './support/model-server.js';
import { planReply, startPlannerStack, type PlannerStack } from './support/planner-stack.js';
import {
  followJobEvents,
  isJobEnd,
  postRun,
  readEvents,
  runToEnd,
  startStack,
  waitFor,
  type Stack,
} from './support/stack.js';
import type { ToolServer } from './support/tool-server.js';

let planned: PlannerStack;
let stack: Stack;
let model: ModelServer;
let server: ToolServer;

beforeAll(async () => {
  // Planner calls ask for structured output named "graph"; the rest are model and agent nodes'.
  planned = await startPlannerStack({
    schemas: ['graph'],
    env: {
      TETRALOOP_AGENT_TOOLS: JSON.stringify({ restricted: ['json'] }),
      // Lessons read at every call, so one saved by a test is in effect at the next node.
      TETRALOOP_LESSON_REFRESH_MS: '0',
    },
  });
  ({ stack, model, server } = planned);
});
afterAll(() => planned?.close());

const fetchNode = (id: string) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/work?node=${id}&ms=1` },
});
const requestsSince = (n: number): ChatRequest[] => model.requests.slice(n);

describe('planning a task', () => {
  it('asks the planner once for a graph through structured output and runs it', async () => {
    const before = model.requests.length;
    planned.setPlanner(() =>
      planReply({
        nodes: [
          fetchNode('p-a'),
          fetchNode('p-b'),
          {
            id: 'p-join',
            kind: 'tool',
            tool: 'json',
            args: { value: ['{{p-a.output.body.node}}', '{{p-b.output.body.node}}'] },
          },
        ],
        edges: [
          ['p-a', 'p-join'],
          ['p-b', 'p-join'],
        ],
      }),
    );
    const doc = await runToEnd(stack.url, { task: 'fetch a and b, then join them' });
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toEqual({ 'p-join': ['p-a', 'p-b'] });
    const calls = requestsSince(before);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.model).toBe('scripted-planner');
    expect(calls[0]!.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'graph' } });
    // The prompt carries the rules and the tool catalog with each tool's JSON schema, in that order.
    const system = calls[0]!.messages[0]!.content!;
    expect(system.indexOf('You plan tasks')).toBeLessThan(system.indexOf('Tool catalog'));
    expect(system).toContain('"name":"http"');
    expect(calls[0]!.messages[1]!.content).toBe('Task: fetch a and b, then join them');
    expect(doc.planning).toMatchObject({
      plannerModel: 'scripted-planner',
      promptVersion: 'planner-v5',
      planVersion: 0,
    });
    expect(doc.planning?.toolCatalogVersion).toMatch(/^[0-9a-f]{12}$/);
    expect(doc.task).toBe('fetch a and b, then join them');
    expect(doc.usage).toMatchObject({
      promptTokens: 100,
      completionTokens: 50,
      totalTokens: 150,
      modelCalls: 1,
    });
    const events = await readEvents(stack.url, doc.runId);
    expect(events.map((e) => e.data.type)).toContain('plan');
  });

  it('runs a plan that sets its own failure policy: a failed step handed downstream, not failing the run', async () => {
    const before = model.requests.length;
    planned.setPlanner(() =>
      planReply({
        nodes: [
          {
            id: 'f-extract',
            kind: 'tool',
            tool: 'http',
            args: { url: `${server.url}/status/500?node=f-extract` },
            onError: 'continue',
            timeoutMs: 2000,
            retry: { server: 1 },
            priority: 8,
          },
          {
            id: 'f-report',
            kind: 'tool',
            tool: 'json',
            args: { value: { got: { $ref: 'f-extract.output' } } },
          },
        ],
        edges: [['f-extract', 'f-report']],
      }),
    );
    const doc = await runToEnd(stack.url, { task: 'extract, and say so if it fails' });
    expect(doc.status).toBe('succeeded');
    // One retry for the 500, as the plan asked, then its error went downstream.
    expect(doc.nodes['f-extract']).toMatchObject({ status: 'failed', error: { code: 'server' } });
    expect(doc.nodes['f-extract']!.attempts).toHaveLength(2);
    expect(doc.output).toEqual({ 'f-report': { got: { error: { code: 'server', message: 'HTTP 500' } } } });
    // The planner was told it may, and its answer schema has the fields.
    const [call] = requestsSince(before);
    expect(call!.messages[0]!.content).toContain('"onError": "continue"');
    expect(JSON.stringify(call!.response_format)).toContain('"onError"');
  });

  it('sends a failure policy past the bounds fixed graphs have back for repair, naming each field', async () => {
    const before = model.requests.length;
    let round = 0;
    planned.setPlanner(() =>
      round++ === 0
        ? planReply({
            nodes: [{ ...fetchNode('b-a'), retry: { server: 11 }, timeoutMs: 700_000, priority: 11 }],
            edges: [],
          })
        : planReply({ nodes: [{ ...fetchNode('b-a'), retry: { server: 2 }, timeoutMs: 5000 }], edges: [] }),
    );
    const doc = await runToEnd(stack.url, { task: 'bounded policy' });
    expect(doc.status).toBe('succeeded');
    const calls = requestsSince(before);
    expect(calls).toHaveLength(2);
    const repair = calls[1]!.messages.at(-1)!.content!;
    for (const field of ['nodes.0.retry.server', 'nodes.0.timeoutMs', 'nodes.0.priority']) {
      expect(repair).toContain(field);
    }
    // The same answer as a fixed graph is refused with the same fields, before anything runs.
    const fixed = await postRun(stack.url, {
      graph: {
        nodes: [{ ...fetchNode('b-a'), retry: { server: 11 }, timeoutMs: 700_000, priority: 11 }],
        edges: [],
      },
    });
    expect(fixed.status).toBe(400);
    for (const field of ['retry.server', 'timeoutMs', 'priority'])
      expect(JSON.stringify(fixed.body)).toContain(field);
  });

  it('repairs a rejected plan once, sending the validation errors back', async () => {
    const before = model.requests.length;
    let round = 0;
    planned.setPlanner(() =>
      round++ === 0
        ? planReply({ nodes: [{ id: 'r-a', kind: 'tool', tool: 'teleport', args: {} }], edges: [] })
        : planReply({ nodes: [fetchNode('r-a')], edges: [] }),
    );
    const doc = await runToEnd(stack.url, { task: 'repair me' });
    expect(doc.status).toBe('succeeded');
    const calls = requestsSince(before);
    expect(calls).toHaveLength(2);
    const repair = calls[1]!.messages.at(-1)!.content!;
    expect(repair).toContain('nodes.0.tool: unknown tool "teleport"');
    expect(doc.usage.modelCalls).toBe(2);
  });

  it('runs a plan that maps over a list found at run time, and sends back a map carrying a kind it may not write', async () => {
    const before = model.requests.length;
    const list = {
      id: 'm-list',
      kind: 'tool',
      tool: 'json',
      args: { value: ['m-0', 'm-1', 'm-2'].map((n) => ({ path: `/work?node=${n}&ms=1` })) },
    };
    const map = (node: unknown) => ({ id: 'm-read', kind: 'map', over: { $ref: 'm-list.output' }, node });
    let round = 0;
    planned.setPlanner(() =>
      planReply({
        nodes: [
          list,
          round++ === 0
            ? map({ kind: 'loop', body: { agent: { prompt: 'go', secrets: ['X'] } }, maxIterations: 2 })
            : map({ kind: 'tool', tool: 'http', args: { url: `${server.url}{{item.path}}` } }),
        ],
        edges: [['m-list', 'm-read']],
      }),
    );
    const doc = await runToEnd(stack.url, { task: 'read every page the list names' });
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(
      (doc.output as { 'm-read': { body: { node: string } }[] })['m-read'].map((o) => o.body.node),
    ).toEqual(['m-0', 'm-1', 'm-2']);
    const calls = requestsSince(before);
    expect(calls).toHaveLength(2);
    // The planner is told it may map, and its answer schema offers it.
    expect(calls[0]!.messages[0]!.content).toContain('A "map" node repeats one step');
    expect(JSON.stringify(calls[0]!.response_format)).toContain('"const":"map"');
    // An item template of a kind the planner may not write (an agent loop naming secrets) is refused.
    expect(calls[1]!.messages.at(-1)!.content).toContain(
      'nodes.1.node.kind: a plan may hold only tool, llm, map nodes, not "loop"',
    );
  });

  it('rejects a plan whole when it needs a tool outside the agent allowlist: nothing runs', async () => {
    const hitsBefore = server.hits.length;
    planned.setPlanner(() =>
      planReply({
        nodes: [fetchNode('x-a'), { id: 'x-b', kind: 'tool', tool: 'json', args: { value: 1 } }],
        edges: [],
      }),
    );
    const doc = await runToEnd(stack.url, { task: 'use http', agentId: 'restricted' });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({
      code: 'plan_rejected',
      issues: [{ path: 'nodes.0.tool', message: 'tool "http" is not allowed for this agent' }],
    });
    expect(doc.graph).toBeNull();
    expect(server.hits.length).toBe(hitsBefore);
  });
});

describe('planner failures', () => {
  it('aborts the planner call when the run is cancelled meanwhile, and settles the run cancelled', async () => {
    let arrived!: () => void;
    const asked = new Promise<void>((resolve) => (arrived = resolve));
    planned.setPlanner(() => {
      arrived();
      return { hang: true };
    });
    const posted = await postRun(stack.url, { task: 'never answered' });
    const runId = posted.body.runId as string;
    await asked;
    const cancel = await fetch(`${stack.url}/v1/runs/${runId}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(202);
    // The model client's timeout is 60 s; settling within waitFor's 20 s means the call was aborted.
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('cancelled');
    expect(doc.error).toMatchObject({ code: 'cancelled' });
  });

  it('fail the run with plan_failed when the planner cannot be asked', async () => {
    planned.setPlanner(() => ({ status: 401, error: { message: 'bad key' } }));
    const doc = await runToEnd(stack.url, { task: 'anything' });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'plan_failed', cause: { code: 'auth' } });
  });
});

describe('llm nodes', () => {
  it('see only the outputs they reference, and report their usage', async () => {
    const before = model.requests.length;
    planned.setOther(() => ({ content: 'summary of A', usage: { promptTokens: 40, completionTokens: 10 } }));
    const doc = await runToEnd(stack.url, {
      input: { secret: 'RUN-INPUT' },
      graph: {
        nodes: [
          { id: 'a', kind: 'tool', tool: 'json', args: { value: 'OUTPUT-OF-A' } },
          { id: 'b', kind: 'tool', tool: 'json', args: { value: 'OUTPUT-OF-B' } },
          { id: 'sum', kind: 'llm', system: 'Be brief.', prompt: 'Summarise: {{a.output}}' },
        ],
        edges: [
          ['a', 'sum'],
          ['b', 'sum'],
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    const [call] = requestsSince(before);
    expect(call!.model).toBe('scripted-node');
    expect(call!.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Summarise: OUTPUT-OF-A' },
    ]);
    expect(JSON.stringify(call)).not.toContain('OUTPUT-OF-B');
    expect(JSON.stringify(call)).not.toContain('RUN-INPUT');
    expect(doc.nodes.sum).toMatchObject({
      status: 'succeeded',
      output: { text: 'summary of A' },
      usage: { promptTokens: 40, completionTokens: 10, totalTokens: 50, modelCalls: 1 },
    });
    expect(doc.usage).toMatchObject({
      promptTokens: 40,
      completionTokens: 10,
      totalTokens: 50,
      modelCalls: 1,
    });
    const events = await readEvents(stack.url, doc.runId);
    const text = events
      .filter((e) => e.data.type === 'assistant.delta')
      .map((e) => (e.data.data as { text: string }).text);
    expect(text.join('')).toBe('summary of A');
    expect(events.find((e) => e.data.type === 'usage')?.data.data).toMatchObject({
      model: 'scripted-node',
      promptTokens: 40,
    });
  });

  it('cut large inputs to the configured budget with a marker', async () => {
    const before = model.requests.length;
    planned.setOther(() => ({ content: 'ok' }));
    await runToEnd(stack.url, {
      graph: {
        nodes: [
          { id: 'big', kind: 'tool', tool: 'json', args: { value: 'x'.repeat(20_000) } },
          { id: 'read', kind: 'llm', prompt: '{{big.output}}' },
        ],
        edges: [['big', 'read']],
      },
    });
    const content = requestsSince(before)[0]!.messages[0]!.content!;
    expect(content).toBe(`${'x'.repeat(8000)}…[truncated 12000 chars]`);
  });

  it('validate structured answers against their schema', async () => {
    planned.setOther((r) => ({
      content: r.messages[0]!.content!.includes('good') ? '{"n": 3}' : '{"n": "three"}',
    }));
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { n: { type: 'number' } },
      required: ['n'],
    };
    const good = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 's', kind: 'llm', prompt: 'good', schema }] },
    });
    expect(good.output).toEqual({ s: { n: 3 } });
    const bad = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 's', kind: 'llm', prompt: 'bad', schema }] },
    });
    expect(bad.nodes.s).toMatchObject({ status: 'failed', error: { code: 'validation' } });
  });

  it('retry a 429 from the model with the harness backoff', async () => {
    let calls = 0;
    planned.setOther(() =>
      calls++ === 0
        ? { status: 429, headers: { 'retry-after': '0' }, error: { message: 'slow down' } }
        : { content: 'fine' },
    );
    const doc = await runToEnd(stack.url, { graph: { nodes: [{ id: 'r', kind: 'llm', prompt: 'hi' }] } });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.r!.attempts.map((a) => a.error?.code ?? 'ok')).toEqual(['rate_limited', 'ok']);
  });
});

describe('replanning', () => {
  it('replans after a budget_exhausted node, keeping completed snapshots, and discards stale jobs', async () => {
    const before = model.requests.length;
    planned.setPlanner((request) =>
      request.messages.at(-1)!.content!.includes('The previous plan stopped')
        ? planReply({
            nodes: [
              fetchNode('rp-a'),
              fetchNode('rp-b'),
              { id: 'rp-c2', kind: 'tool', tool: 'json', args: { value: 'done' } },
            ],
            edges: [
              ['rp-a', 'rp-b'],
              ['rp-b', 'rp-c2'],
            ],
          })
        : planReply({
            nodes: [fetchNode('rp-a'), fetchNode('rp-b'), fetchNode('rp-c')],
            edges: [
              ['rp-a', 'rp-b'],
              ['rp-b', 'rp-c'],
            ],
          }),
    );
    const doc = await runToEnd(stack.url, { task: 'three steps', budget: { toolCalls: 2 } });
    expect(doc.status).toBe('succeeded');
    expect(doc.generation).toBe(1);
    expect(doc.replans).toBe(1);
    expect(doc.planning).toMatchObject({ planVersion: 1 });
    expect(doc.output).toEqual({ 'rp-c2': 'done' });
    // The completed nodes were reused, not run again; the exhausted one was replaced.
    expect(server.hitsOf('rp-a')).toHaveLength(1);
    expect(server.hitsOf('rp-b')).toHaveLength(1);
    expect(server.hitsOf('rp-c')).toHaveLength(0);
    const replanCall = planned.plannerRequests(before)[1]!;
    expect(replanCall.messages.at(-1)!.content).toContain('budget');
    expect(replanCall.messages.at(-1)!.content).toContain('"rp-a"');

    // A node job of the old plan version that turns up late is discarded, not executed.
    const redis = new Redis(stack.env.REDIS_URL!, { maxRetriesPerRequest: null });
    const tool = new Queue('tool', { connection: redis, prefix: stack.prefix });
    // Followed from before the add, so its end cannot come before the reading starts.
    const events = await followJobEvents(stack, ['tool']);
    const late = await tool.add(
      'node',
      { runId: doc.runId, nodeId: 'rp-c', generation: 0 },
      { jobId: `${nodeJobId(doc.runId, 'rp-c')}-late` },
    );
    const end = await events.next(
      (e) => isJobEnd(e, late.id),
      Date.now() + 10_000,
      'the late node job to end',
    );
    expect(end.event).toBe('completed');
    expect((await Job.fromId(tool, late.id!))?.returnvalue).toEqual({ status: 'stale' });
    expect(server.hitsOf('rp-c')).toHaveLength(0);
    events.close();
    await tool.close();
    redis.disconnect();
  });
});

describe('lessons in planning', () => {
  it('tells the planner the lessons in effect and rejects a plan that calls a blocked service', async () => {
    const agentId = 'learner';
    const host = new URL(server.url).host;
    const now = new Date().toISOString();
    const scope = { tool: 'http', host };
    const hard = lessonRecord(
      {
        agentId,
        kind: 'hard',
        rule: 'service-down',
        scope,
        statement: `${host} is down for http`,
        confidence: 0.9,
      },
      now,
    );
    const soft = lessonRecord(
      { agentId, rule: 'service-flaky', scope, statement: `${host} often fails for http` },
      now,
    );
    const redis = new Redis(stack.env.REDIS_URL!);
    await new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 }).saveReflection(
      agentId,
      [hard, soft],
      true,
      now,
    );
    redis.disconnect();
    const before = model.requests.length;
    let round = 0;
    planned.setPlanner(() =>
      round++ === 0
        ? planReply({ nodes: [fetchNode('l-a')], edges: [] })
        : planReply({
            nodes: [{ id: 'l-a', kind: 'tool', tool: 'json', args: { value: 'cached' } }],
            edges: [],
          }),
    );
    const doc = await runToEnd(stack.url, { task: 'learn', agentId });
    expect(doc.status).toBe('succeeded');
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    const system = calls[0]!.messages[0]!.content!;
    // Most confident first, after the workspace files.
    expect(system).toContain(
      `## Lessons (learned from earlier runs)\n- ${hard.statement}\n- ${soft.statement}`,
    );
    expect(calls[1]!.messages.at(-1)!.content).toContain(`blocked by lesson ${hard.id}`);
    expect(doc.planning).toMatchObject({ lessonsVersion: 1, lessons: [hard.id, soft.id] });
    expect(server.hitsOf('l-a')).toHaveLength(0);
  });
  it('replans the remaining work when a hard lesson made after the plan blocks its next call', async () => {
    const agentId = 'learner-late';
    const host = new URL(server.url).host;
    let round = 0;
    // A model step first (not a call to the host the lesson will be about), answered only once
    // the lesson exists.
    const slow = { id: 'v-slow', kind: 'llm', prompt: 'think slowly' };
    const isSlow = (r: ChatRequest): boolean => JSON.stringify(r.messages).includes('think slowly');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    planned.setOther(async (request) => {
      if (isSlow(request)) await released;
      return { content: isSlow(request) ? 'thought' : 'ok' };
    });
    planned.setPlanner(() =>
      round++ === 0
        ? planReply({ nodes: [slow, fetchNode('v-next')], edges: [['v-slow', 'v-next']] })
        : planReply({
            nodes: [slow, { id: 'v-next', kind: 'tool', tool: 'json', args: { value: 'around' } }],
            edges: [['v-slow', 'v-next']],
          }),
    );
    const before = model.requests.length;
    const posted = await postRun(stack.url, { task: 'slow, then next', agentId });
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const runId = posted.body.runId as string;
    await model.received(isSlow);
    // While v-slow runs, a reflection makes a hard lesson about the host v-next calls; its one
    // probe per interval is taken, so the call is refused rather than let through.
    const now = new Date().toISOString();
    const hard = lessonRecord(
      {
        agentId,
        kind: 'hard',
        rule: 'service-down',
        scope: { tool: 'http', host },
        statement: `${host} is down for http`,
        confidence: 0.9,
      },
      now,
    );
    const redis = new Redis(stack.env.REDIS_URL!);
    const memory = new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 });
    await memory.saveReflection(agentId, [hard], true, now);
    await memory.claimProbe(agentId, hard.id, 3_600_000);
    redis.disconnect();
    release();

    const doc = await waitFor(stack.url, runId);
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(doc.output).toEqual({ 'v-next': 'around' });
    expect(doc.replans).toBe(1);
    // The new plan was asked for with the refusal, and kept the slow node's result.
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    expect(calls[1]!.messages.at(-1)!.content).toContain(`blocked by lesson ${hard.id}`);
    expect(requestsSince(before).filter(isSlow)).toHaveLength(1);
    expect(server.hitsOf('v-next')).toHaveLength(0);
    planned.setOther(() => ({ content: 'ok' }));
  });
});

describe('the classic loop', () => {
  it('stops at maxIterations when the model keeps calling tools', async () => {
    const before = model.requests.length;
    planned.setOther(() => ({ content: '', toolCalls: [{ name: 'json', arguments: { value: 'again' } }] }));
    const doc = await runToEnd(stack.url, { task: 'never finish', mode: 'loop', maxIterations: 3 });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.agent).toMatchObject({ output: { iterations: 3, stoppedBy: 'maxIterations' } });
    const calls = requestsSince(before);
    expect(calls).toHaveLength(3);
    // Each turn resends the whole conversation: the context grows.
    expect(calls[2]!.messages.length).toBeGreaterThan(calls[0]!.messages.length);
    expect(calls[0]!.tools).toBeDefined();
  });

  it('ends budget_exhausted when a turn finds the tool-time budget spent', async () => {
    const before = model.requests.length;
    planned.setOther((r) =>
      r.messages.some((m) => m.role === 'tool')
        ? { content: 'done' }
        : { content: '', toolCalls: [{ name: 'wait', arguments: { ms: 200 } }] },
    );
    // The first turn's tool call uses up the 20 ms of tool time; the next turn is not asked.
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'agent',
            kind: 'loop',
            body: { agent: { prompt: 'wait', tools: ['wait'] } },
            maxIterations: 3,
          },
        ],
      },
      budget: { toolTimeMs: 20 },
    });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'budget_exhausted', nodeId: 'agent' });
    expect(doc.nodes.agent).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exhausted', budget: 'toolTimeMs' },
    });
    expect(requestsSince(before)).toHaveLength(1);
  });

  it('ends when the model answers without a tool call', async () => {
    planned.setOther((r) =>
      r.messages.some((m) => m.role === 'tool')
        ? { content: 'the answer is 42' }
        : { content: '', toolCalls: [{ name: 'json', arguments: { value: 42 } }] },
    );
    const doc = await runToEnd(stack.url, { task: 'find the answer', mode: 'loop' });
    expect(doc.nodes.agent).toMatchObject({
      output: { text: 'the answer is 42', iterations: 2, stoppedBy: 'final' },
    });
    expect(doc.usage.modelCalls).toBe(2);
    expect(doc.usage.toolCalls).toBe(1);
  });
});

describe('without a model', () => {
  it('refuses task runs and llm nodes at validation, naming the variables to set', async () => {
    const bare = await startStack({ pools: [] });
    try {
      const task = await postRun(bare.url, { task: 'anything' });
      expect(task.status).toBe(400);
      expect(JSON.stringify(task.body)).toContain('OPENAI_API_KEY');
      const llm = await postRun(bare.url, { graph: { nodes: [{ id: 'l', kind: 'llm', prompt: 'hi' }] } });
      expect(llm.status).toBe(400);
      expect(llm.body).toMatchObject({ error: { issues: [{ path: 'graph.nodes.0.kind' }] } });
      // Fixed graphs without model nodes are still accepted.
      const plain = await postRun(bare.url, {
        graph: { nodes: [{ id: 'j', kind: 'tool', tool: 'json', args: { value: 1 } }] },
      });
      expect(plain.status).toBe(202);
    } finally {
      await bare.close();
    }
  });
});
