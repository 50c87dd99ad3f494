/**
 * The cost ledger and money budgets on a real Redis, with the real API and workers and the scripted
 * model server (through the real `openai` SDK): each call priced by the table to the nano-dollar,
 * per node, run, agent, session and tenant and day; the cost metric; a run failing at its money
 * budget, or pausing there — holding no worker — until a budget decision raises it or stops it; a
 * tenant's daily cap; and the refusals of bad input, each at its field.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { costDay } from '@tetraloop/core/cost';
import type { RunDocument, WaitRecord } from '@tetraloop/core/domain';
import { nodeJobId } from '@tetraloop/core/queues';
import type { RunRequest } from '@tetraloop/core/runs';
import { CostLedger, costDayKey, runKeys, type DailyCost } from '@tetraloop/core/state';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import {
  followJobEvents,
  post,
  postRun,
  readEvents,
  runToEnd,
  startStack,
  untilEvent,
  waitFor,
  type Stack,
} from './support/stack.js';

let stack: Stack;
let model: ModelServer;
let redis: Redis;

/** USD per million tokens → nano-dollars per token, worked out here by hand. */
const MINI = { input: 150, cached: 75, output: 600 }; // gpt-4o-mini: $0.15 / $0.075 / $0.60
const NANO = { input: 100, output: 400 }; // gpt-4.1-nano: $0.10 / $0.40 (the built-in table)
const PLANNER = { input: 3000, output: 15_000 }; // planner-x: $3 / $15 (TETRALOOP_MODEL_PRICES)

/** A prompt that asks the scripted model to report this usage: `usage <prompt> <completion> <cached>`. */
const asking = (prompt: number, completion: number, cached = 0): string =>
  `usage ${prompt} ${completion} ${cached}`;
/** Calls of `gpt-4o-mini` with 1,234 prompt tokens (200 cached) and 567 completion tokens. */
const BIG = asking(1234, 567, 200);
const BIG_NANO = (1234 - 200) * MINI.input + 200 * MINI.cached + 567 * MINI.output; // 510,300

const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

beforeAll(async () => {
  model = await startModelServer({
    script: (request) => {
      if (isPlannerCall(request)) {
        const graph = { nodes: [{ id: 'p', kind: 'tool', tool: 'json', args: { value: 1 } }], edges: [] };
        return { content: JSON.stringify(graph), usage: { promptTokens: 100, completionTokens: 50 } };
      }
      const said = request.messages.map((m) => m.content ?? '').join('\n');
      const m = /usage (\d+) (\d+) (\d+)/.exec(said);
      if (!m) return { content: 'ok', usage: { promptTokens: 10, completionTokens: 10 } };
      const cached = Number(m[3]);
      return {
        content: 'ok',
        usage: {
          promptTokens: Number(m[1]),
          completionTokens: Number(m[2]),
          ...(cached > 0 ? { cachedPromptTokens: cached } : {}),
        },
      };
    },
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL: 'gpt-4o-mini',
      TETRALOOP_PLANNER_MODEL: 'planner-x',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_MODEL_PRICES: JSON.stringify({ 'planner-x': { input: 3, output: 15 } }),
      TETRALOOP_TENANTS: JSON.stringify({ acme: { dailyCostUsd: 0.0001 } }),
      // One node job at a time: a paused node that held its worker would stop everything else.
      TETRALOOP_TOOL_CONCURRENCY: '1',
      // No agent folders: any agent id runs.
      TETRALOOP_WORKSPACE_DIR: mkdtempSync(join(tmpdir(), 'tetraloop-cost-')),
    },
  });
  redis = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
  redis?.disconnect();
});

const llm = (id: string, prompt: string, extra: object = {}) => ({ id, kind: 'llm', prompt, ...extra });
const chain = (...nodes: { id: string }[]) => ({
  nodes,
  edges: nodes.slice(1).map((n, i) => [nodes[i]!.id, n.id]),
});
const agentOf = (name: string): string => `${name}-${randomUUID().slice(0, 8)}`;
const costNanoOf = async (runId: string): Promise<number> =>
  Number(await redis.hget(runKeys(stack.prefix, runId).aux, 'usage:costNanoUsd'));
const usageToday = async (): Promise<DailyCost> => {
  const res = await fetch(`${stack.url}/v1/usage`);
  expect(res.status).toBe(200);
  return (await res.json()) as DailyCost;
};

describe('the cost of a run', () => {
  it('is the price table applied to each call, per node and per run, exact to the nano-dollar', async () => {
    const agentId = agentOf('pricer');
    const doc = await runToEnd(stack.url, {
      agentId,
      graph: chain(
        llm('mini', BIG),
        llm('nano', asking(7, 3), { model: 'gpt-4.1-nano' }),
        llm('local', asking(10, 10), { model: 'local-llama' }),
      ),
    });
    expect(doc.status).toBe('succeeded');
    const nanoNano = 7 * NANO.input + 3 * NANO.output;
    expect(doc.nodes.mini).toMatchObject({
      usage: {
        promptTokens: 1234,
        cachedPromptTokens: 200,
        completionTokens: 567,
        modelCalls: 1,
        costUsd: BIG_NANO / 1e9,
      },
    });
    expect(doc.nodes.nano).toMatchObject({ usage: { costUsd: nanoNano / 1e9 } });
    // A model without a price: its tokens are counted, its cost is not known.
    expect(doc.nodes.local).toMatchObject({ usage: { promptTokens: 10, completionTokens: 10 } });
    expect((doc.nodes.local as { usage?: { costUsd?: number } }).usage?.costUsd).toBeUndefined();
    // The run's usage is the sum in integer nano-dollars, shown as dollars.
    expect(await costNanoOf(doc.runId)).toBe(BIG_NANO + nanoNano);
    expect(doc.usage).toMatchObject({
      costUsd: (BIG_NANO + nanoNano) / 1e9,
      unpricedModelCalls: 1,
      modelCalls: 3,
    });
    const usageEvents = (await readEvents(stack.url, doc.runId))
      .map((e) => e.data)
      .filter((e) => e.type === 'usage');
    expect(usageEvents.map((e) => [e.nodeId, e.data])).toEqual([
      [
        'mini',
        expect.objectContaining({ model: 'gpt-4o-mini', cachedPromptTokens: 200, costUsd: BIG_NANO / 1e9 }),
      ],
      ['nano', expect.objectContaining({ model: 'gpt-4.1-nano', costUsd: nanoNano / 1e9 })],
      ['local', expect.not.objectContaining({ costUsd: expect.anything() })],
    ]);

    // The day's ledger: the agent's total, its models, and the metric.
    const day = await usageToday();
    expect(day.agents[agentId]).toEqual({ costUsd: (BIG_NANO + nanoNano) / 1e9, modelCalls: 3 });
    expect(day.models['local-llama']?.costUsd).toBe(0);
    expect(day.unpricedModelCalls).toBeGreaterThanOrEqual(1);
    const metrics = await (await fetch(`${stack.url}/metrics`)).text();
    const line = metrics
      .split('\n')
      .find((l) =>
        l.startsWith(
          `tetraloop_model_cost_usd_total{model="gpt-4o-mini",agent="${agentId}",tenant="default"}`,
        ),
      );
    expect(line, 'the cost counter of the agent').toBeDefined();
    expect(Number(line!.split(' ').at(-1))).toBeCloseTo(BIG_NANO / 1e9, 12);
    expect(metrics).toMatch(/^tetraloop_model_unpriced_calls_total\{model="local-llama"\} [1-9]/m);
  });

  it("counts the planner's calls, and an agent loop's turns, priced like a node's", async () => {
    const agentId = agentOf('planned');
    const planned = await runToEnd(stack.url, { agentId, task: 'plan something' });
    expect(planned.status).toBe('succeeded');
    const plannerNano = 100 * PLANNER.input + 50 * PLANNER.output;
    expect(planned.usage).toMatchObject({ costUsd: plannerNano / 1e9, modelCalls: 1 });

    const looped = await runToEnd(stack.url, {
      agentId,
      graph: {
        nodes: [{ id: 'agent', kind: 'loop', maxIterations: 3, body: { agent: { prompt: BIG } } }],
        edges: [],
      },
    });
    expect(looped.status).toBe('succeeded');
    expect(looped.nodes.agent).toMatchObject({ usage: { costUsd: BIG_NANO / 1e9, cachedPromptTokens: 200 } });
    expect(await costNanoOf(looped.runId)).toBe(BIG_NANO);
    expect((await usageToday()).agents[agentId]).toEqual({
      costUsd: (plannerNano + BIG_NANO) / 1e9,
      modelCalls: 2,
    });
  });

  it("adds up per session and per tenant in the day's ledger, kept with a TTL", async () => {
    const key = `cost-${randomUUID().slice(0, 8)}`;
    const said = await post(stack.url, `/v1/sessions/${key}/messages`, { text: BIG });
    expect(said.status).toBe(202);
    const doc = await waitFor(stack.url, said.body.runId as string);
    expect(doc.status).toBe('succeeded');
    expect(doc.usage.costUsd).toBe(BIG_NANO / 1e9);

    const day = await usageToday();
    expect(day).toMatchObject({ tenant: 'default', day: costDay(new Date()) });
    expect(day.sessions[key]).toEqual({ costUsd: BIG_NANO / 1e9, modelCalls: 1 });
    // Every call has an agent: the agents' totals add up to the tenant's, to the nano-dollar.
    const nano = (usd: number): number => Math.round(usd * 1e9);
    const agents = Object.values(day.agents);
    expect(agents.reduce((t, a) => t + nano(a.costUsd), 0)).toBe(nano(day.costUsd));
    expect(agents.reduce((t, a) => t + a.modelCalls, 0)).toBe(day.modelCalls);
    const models = Object.values(day.models);
    expect(models.reduce((t, m) => t + nano(m.costUsd), 0)).toBe(nano(day.costUsd));

    const ttl = await redis.ttl(costDayKey(stack.prefix, 'default', day.day));
    expect(ttl).toBeGreaterThan(35 * 86_400);
    expect(ttl).toBeLessThanOrEqual(36 * 86_400);
    // Another day: nothing spent; a day that does not exist: refused at the field.
    expect(await (await fetch(`${stack.url}/v1/usage?day=2020-01-01`)).json()).toMatchObject({
      costUsd: 0,
      modelCalls: 0,
      agents: {},
    });
    const bad = await fetch(`${stack.url}/v1/usage?day=2026-02-30`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { issues: [{ path: 'query.day' }] } });
  });
});

describe('a money budget', () => {
  const overBudget = (extra: object = {}) => ({
    graph: chain(llm('first', BIG), llm('second', BIG)),
    budget: { costUsd: 0.0001 },
    ...extra,
  });

  it('fails the model call that finds it spent, as budget_exhausted', async () => {
    const doc = await runToEnd(stack.url, overBudget());
    expect(doc.status).toBe('failed');
    // The first call started under the budget and ended above it; the second never went out.
    expect(doc.nodes.first).toMatchObject({ status: 'succeeded' });
    expect(doc.nodes.second).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exhausted', budget: 'costUsd' },
    });
    expect(doc.error).toMatchObject({ code: 'budget_exhausted', nodeId: 'second' });
    expect(doc.usage.costUsd).toBe(BIG_NANO / 1e9);
    expect(doc).toMatchObject({ budget: { costUsd: 0.0001 }, onBudget: 'fail' });
  });

  it('with onBudget "pause" parks the node holding no worker, and a raise lets the run finish', async () => {
    const jobs = await followJobEvents(stack, ['tool']);
    const posted = await postRun(stack.url, overBudget({ onBudget: 'pause' }));
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    const paused = await untilEvent(stack.url, runId, (e) => e.data.type === 'budget.paused', {
      what: 'budget.paused',
    });
    const signal = (paused.data.data as { signal: string }).signal;
    expect(signal).toMatch(/^budget\.[0-9a-f]{24}$/);
    expect(paused.data).toMatchObject({
      nodeId: 'second',
      family: 'budget',
      data: { budget: 'costUsd', costUsd: 0.0001, spentUsd: BIG_NANO / 1e9 },
    });
    // The node's job sits in BullMQ's delayed set, not in a worker.
    const jobId = nodeJobId(runId, 'second');
    await jobs.next((e) => e.jobId === jobId && e.event === 'delayed', Date.now() + 20_000, 'delayed');
    jobs.close();
    const tool = new Queue('tool', { connection: redis, prefix: stack.prefix });
    expect(await tool.getJobState(jobId)).toBe('delayed');
    await tool.close();
    const waiting = (await (await fetch(`${stack.url}/v1/runs/${runId}`)).json()) as RunDocument;
    expect(waiting.status).toBe('running');
    expect(waiting.nodes.second).toMatchObject({ status: 'waiting', signal });
    expect((waiting.nodes.second as { waits?: WaitRecord[] }).waits).toEqual([
      expect.objectContaining({ signal, budget: { costUsd: 0.0001, spentUsd: BIG_NANO / 1e9 } }),
    ]);
    // With the run's node parked, the one worker slot runs another run meanwhile.
    expect((await runToEnd(stack.url, { graph: chain(llm('other', 'hi')) })).status).toBe('succeeded');

    // Only the name that was asked; only a budget above the current one.
    expect(
      (await post(stack.url, `/v1/runs/${runId}/signals/budget.${'0'.repeat(24)}`, { costUsd: 1 })).status,
    ).toBe(409);
    const lower = await post(stack.url, `/v1/runs/${runId}/signals/${signal}`, { costUsd: 0.00005 });
    expect(lower.status).toBe(409);
    expect(lower.body).toMatchObject({ error: { code: 'budget_not_raised' } });
    const raised = await post(stack.url, `/v1/runs/${runId}/signals/${signal}`, { costUsd: 1 });
    expect(raised.status).toBe(202);
    expect(raised.body).toMatchObject({ delivered: true });

    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.budget.costUsd).toBe(1);
    expect(await costNanoOf(runId)).toBe(2 * BIG_NANO);
    const types = (await readEvents(stack.url, runId)).map((e) => e.data);
    expect(types.find((e) => e.type === 'budget.raised')).toMatchObject({
      family: 'budget',
      data: { budget: 'costUsd', from: 0.0001, to: 1, signal, decidedBy: { tenant: 'default' } },
    });
  });

  it('stops the paused run on a stop decision: the node fails budget_exhausted', async () => {
    const posted = await postRun(stack.url, overBudget({ onBudget: 'pause' }));
    const runId = posted.body.runId as string;
    const paused = await untilEvent(stack.url, runId, (e) => e.data.type === 'budget.paused', {
      what: 'budget.paused',
    });
    const signal = (paused.data.data as { signal: string }).signal;
    expect((await post(stack.url, `/v1/runs/${runId}/signals/${signal}`, { stop: true })).status).toBe(202);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('failed');
    expect(doc.nodes.second).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exhausted', budget: 'costUsd', message: expect.stringMatching(/stopped it/) },
    });
    expect(doc.budget.costUsd).toBe(0.0001);
  });

  it('refuses bad input with 400 at the exact field', async () => {
    const paths = (body: Record<string, unknown>): string[] =>
      ((body.error as { issues?: { path: string }[] }).issues ?? []).map((i) => i.path);
    const negative = await postRun(stack.url, overBudget({ budget: { costUsd: -1 } }));
    expect(negative.status).toBe(400);
    expect(paths(negative.body)).toEqual(['budget.costUsd']);
    const unknown = await postRun(stack.url, overBudget({ onBudget: 'wait' }));
    expect(unknown.status).toBe(400);
    expect(paths(unknown.body)).toEqual(['onBudget']);

    // A budget decision's payload is checked before anything else.
    const posted = await postRun(stack.url, overBudget({ onBudget: 'pause' }));
    const runId = posted.body.runId as string;
    const paused = await untilEvent(stack.url, runId, (e) => e.data.type === 'budget.paused', {
      what: 'budget.paused',
    });
    const signal = (paused.data.data as { signal: string }).signal;
    const send = (body: unknown) => post(stack.url, `/v1/runs/${runId}/signals/${signal}`, body);
    const below = await send({ costUsd: -2 });
    expect(below.status).toBe(400);
    expect(paths(below.body)).toEqual(['body.costUsd']);
    const neither = await send({});
    expect(neither.status).toBe(400);
    expect(paths(neither.body)).toEqual(['body']);
    expect(paths((await send({ costUsd: 1, extra: 1 })).body)).toEqual(['body']);
    expect((await post(stack.url, `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await waitFor(stack.url, runId)).status).toBe('cancelled');
  });
});

describe("a tenant's daily cap", () => {
  it('fails model calls once the tenant spent it today, and books what was spent', async () => {
    const request = (graph: unknown): RunRequest => ({
      graph,
      agentId: 'main',
      mode: 'dag',
      maxIterations: 10,
      maxReplans: 0,
      timeoutSeconds: 60,
      priority: 5,
      onBudget: 'pause',
    });
    const settled = async (runId: string): Promise<RunDocument> => {
      await stack.api.waiter.wait(runId, 20_000, async () => (await stack.api.runs.settled(runId)) !== false);
      return (await stack.api.runs.get(runId))!;
    };
    const first = await stack.api.runs.submit(request(chain(llm('a', BIG), llm('b', BIG))), undefined, {
      tenant: 'acme',
    });
    const doc = await settled(first.runId);
    // The cap is the tenant's, not the run's: it fails even with onBudget "pause".
    expect(doc.nodes.a).toMatchObject({ status: 'succeeded' });
    expect(doc.nodes.b).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exhausted', budget: 'dailyCostUsd' },
    });
    const second = await stack.api.runs.submit(request(chain(llm('c', 'hi'))), undefined, { tenant: 'acme' });
    expect((await settled(second.runId)).nodes.c).toMatchObject({
      error: { code: 'budget_exhausted', budget: 'dailyCostUsd' },
    });
    // Nor is the planner asked for a task run of the tenant.
    const plannerCalls = model.requests.filter(isPlannerCall).length;
    const task = await stack.api.runs.submit(
      { ...request(undefined), graph: undefined, task: 'plan it' },
      undefined,
      {
        tenant: 'acme',
      },
    );
    expect(await settled(task.runId)).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exhausted', cause: { budget: 'dailyCostUsd' } },
    });
    expect(model.requests.filter(isPlannerCall).length).toBe(plannerCalls);
    const ledger = new CostLedger(redis, { prefix: stack.prefix, days: 35 });
    expect(await ledger.spentNano('acme', costDay(new Date()))).toBe(BIG_NANO);
    expect(await ledger.day('acme', costDay(new Date()))).toMatchObject({
      tenant: 'acme',
      costUsd: BIG_NANO / 1e9,
      modelCalls: 1,
      agents: { main: { costUsd: BIG_NANO / 1e9, modelCalls: 1 } },
    });
  });
});
