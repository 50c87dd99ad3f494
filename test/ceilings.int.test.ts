/**
 * Ceilings over HTTP and through the workers: declared agents, tenants' agents and models, budget
 * ceilings, the models allowlist on fixed and planned graphs, and child runs drawing from their
 * parent's tokens. Rate limits and the running cap have stacks of their own below.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { derivedRunId, type RunDocument } from '@tetraloop/core/domain';
import { runJobId } from '@tetraloop/core/queues';
import { RequestRefusedError, type RunRequest } from '@tetraloop/core/runs';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import {
  followJobEvents,
  post,
  postRun,
  runToEnd,
  startStack,
  untilNodeStatus,
  waitFor,
  type Stack,
} from './support/stack.js';

const json = (id: string, value: unknown = 1) => ({ id, kind: 'tool', tool: 'json', args: { value } });
const graphOf = (...nodes: unknown[]) => ({ nodes, edges: [] });
const issuePaths = (body: Record<string, unknown>): string[] =>
  ((body.error as { issues?: { path: string }[] }).issues ?? []).map((i) => i.path);

describe('ceilings', () => {
  let stack: Stack;
  let model: ModelServer;
  let planner: (request: ChatRequest) => ScriptedReply = () => ({ content: '{}' });
  const isPlannerCall = (r: ChatRequest): boolean =>
    (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

  beforeAll(async () => {
    const workspace = mkdtempSync(join(tmpdir(), 'tetraloop-ceilings-'));
    mkdirSync(join(workspace, 'scout'));
    model = await startModelServer({
      script: (request) =>
        isPlannerCall(request)
          ? planner(request)
          : { content: 'ok', usage: { promptTokens: 100, completionTokens: 50 } },
    });
    stack = await startStack({
      env: {
        OPENAI_BASE_URL: model.url,
        TETRALOOP_MODEL: 'small',
        TETRALOOP_PLANNER_MODEL: 'planner',
        TETRALOOP_MODEL_MAX_RETRIES: '0',
        TETRALOOP_WORKSPACE_DIR: workspace,
        TETRALOOP_AGENTS: JSON.stringify({ main: {}, analyst: { tools: ['json'] }, writer: {} }),
        TETRALOOP_TENANTS: JSON.stringify({ acme: { agents: ['main'], models: ['small'] } }),
        TETRALOOP_MODELS_ALLOW: 'small,big',
        TETRALOOP_BUDGET_MAX_TOKENS: '5000',
        TETRALOOP_BUDGET_MAX_TOOL_CALLS: '20',
        TETRALOOP_MAX_TIMEOUT_SECONDS: '120',
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
    await model?.close();
  });

  it('refuses an agent that is not declared, and runs those declared by TETRALOOP_AGENTS or a workspace folder', async () => {
    const refused = await postRun(stack.url, { graph: graphOf(json('a')), agentId: 'ghost' });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_request' });
    expect(issuePaths(refused.body)).toEqual(['agentId']);
    for (const agentId of ['writer', 'scout']) {
      const doc = await runToEnd(stack.url, { graph: graphOf(json('a')), agentId });
      expect(doc).toMatchObject({ status: 'succeeded', agentId });
    }
  });

  it('holds an agent to its tools', async () => {
    const posted = await postRun(stack.url, {
      graph: graphOf({ id: 'a', kind: 'tool', tool: 'http', args: { url: 'http://127.0.0.1/' } }),
      agentId: 'analyst',
    });
    expect(posted.status).toBe(400);
    expect(issuePaths(posted.body)).toEqual(['graph.nodes.0.tool']);
  });

  it("refuses a run of a tenant naming an agent outside the tenant's agents", async () => {
    const request = (agentId: string): RunRequest => ({
      graph: graphOf(json('a')),
      agentId,
      mode: 'dag',
      maxIterations: 10,
      maxReplans: 2,
      timeoutSeconds: 60,
      priority: 5,
      onBudget: 'fail',
    });
    const refused = stack.api.runs.submit(request('writer'), undefined, { tenant: 'acme' });
    await expect(refused).rejects.toBeInstanceOf(RequestRefusedError);
    await expect(refused).rejects.toMatchObject({ issues: [{ path: 'agentId' }] });
    const accepted = await stack.api.runs.submit(request('main'), undefined, { tenant: 'acme' });
    // An acme run: read in-process (over HTTP the default tenant, auth being off here, finds none).
    await stack.api.waiter.wait(
      accepted.runId,
      20_000,
      async () => (await stack.api.runs.settled(accepted.runId)) !== false,
    );
    const doc = await stack.api.runs.get(accepted.runId);
    expect(doc).toMatchObject({ status: 'succeeded', tenant: 'acme' });
    expect((await fetch(`${stack.url}/v1/runs/${accepted.runId}`)).status).toBe(404);
    // Another tenant is not held to acme's list.
    await expect(stack.api.runs.submit(request('writer'))).resolves.toMatchObject({ status: 'queued' });
  });

  it('clamps the budget and the deadline a request asks for to the ceilings, and shows them', async () => {
    const posted = await postRun(stack.url, {
      graph: graphOf(json('a')),
      budget: { tokens: 1_000_000, toolCalls: 5 },
      timeoutSeconds: 3600,
    });
    expect(posted.status).toBe(202);
    const doc = await waitFor(stack.url, posted.body.runId as string);
    expect(doc.budget).toEqual({ toolCalls: 5, toolTimeMs: 600_000, tokens: 5000 });
    expect(doc.timeoutSeconds).toBe(120);
    // The defaults are clamped too: 1000 tool calls by default, 20 at most.
    const byDefault = await runToEnd(stack.url, { graph: graphOf(json('a')) });
    expect(byDefault.budget.toolCalls).toBe(20);
  });

  it('refuses a model outside the allowlist with the path of the field that names it', async () => {
    const posted = await postRun(stack.url, {
      graph: graphOf(
        { id: 'a', kind: 'llm', prompt: 'hi', model: 'big' },
        { id: 'b', kind: 'llm', prompt: 'hi', model: 'huge' },
        { id: 'c', kind: 'loop', maxIterations: 1, body: { agent: { prompt: 'hi', model: 'huge' } } },
      ),
    });
    expect(posted.status).toBe(400);
    expect(issuePaths(posted.body)).toEqual(['graph.nodes.1.model', 'graph.nodes.2.body.agent.model']);
    // acme's own list is narrower: `big` is refused for it, and so would be a default outside it.
    const refused = stack.api.runs.submit(
      {
        graph: graphOf({ id: 'a', kind: 'llm', prompt: 'hi', model: 'big' }),
        agentId: 'main',
        mode: 'dag',
        maxIterations: 10,
        maxReplans: 2,
        timeoutSeconds: 60,
        priority: 5,
        onBudget: 'fail',
      },
      undefined,
      { tenant: 'acme' },
    );
    await expect(refused).rejects.toMatchObject({ issues: [{ path: 'graph.nodes.0.model' }] });
  });

  it('rejects a planned graph that names a model outside the allowlist', async () => {
    planner = () => ({
      content: JSON.stringify(graphOf({ id: 'ask', kind: 'llm', prompt: 'hi', model: 'huge' })),
      usage: { promptTokens: 10, completionTokens: 10 },
    });
    const doc = await runToEnd(stack.url, { task: 'plan with a forbidden model' });
    expect(doc.status).toBe('failed');
    expect(doc.error?.code).toBe('plan_rejected');
    expect(doc.error?.issues?.map((i) => i.path)).toEqual(['nodes.0.model']);
    expect(doc.error?.issues?.[0]?.message).toMatch(/"huge" is not allowed by TETRALOOP_MODELS_ALLOW/);
  });

  it("gives a loop's child runs what is left of the parent's tokens and charges their tokens to it", async () => {
    const doc = await runToEnd(stack.url, {
      graph: graphOf({
        id: 'loop',
        kind: 'loop',
        maxIterations: 2,
        body: { graph: graphOf({ id: 'ask', kind: 'llm', prompt: 'hi' }) },
      }),
      budget: { tokens: 1000 },
    });
    expect(doc.status).toBe('succeeded');
    // Two iterations, one model call of 150 tokens each, made by the child runs.
    expect(doc.usage).toMatchObject({
      totalTokens: 300,
      promptTokens: 200,
      completionTokens: 100,
      modelCalls: 2,
    });
    const child = async (n: number): Promise<RunDocument> =>
      (await (
        await fetch(`${stack.url}/v1/runs/${derivedRunId(doc.runId, 'loop', 0, n)}`)
      ).json()) as RunDocument;
    const [first, second] = [await child(1), await child(2)];
    expect(first.budget.tokens).toBe(1000);
    expect(second.budget.tokens).toBe(850);
    expect(first.usage.totalTokens).toBe(150);
    expect(second.agentId).toBe('main');
  });
});

describe('session messages', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ pools: [], env: { TETRALOOP_AGENTS: JSON.stringify({ analyst: {} }) } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('refuses a message when the session agent (main) is not declared', async () => {
    const res = await post(stack.url, '/v1/sessions/ceil-a/messages', { text: 'hello' });
    expect(res.status).toBe(400);
    expect(issuePaths(res.body)).toEqual(['agentId']);
  });
});

describe('rate limits', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ pools: [], env: { TETRALOOP_RATE_LIMIT_PER_TENANT: '3' } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("answers 429 with Retry-After once the tenant's requests of the minute are used", async () => {
    for (let i = 0; i < 3; i++) expect((await fetch(`${stack.url}/v1/sources`)).status).toBe(200);
    const limited = await fetch(`${stack.url}/v1/sources`);
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    // 3 a minute: one comes back within 20 s.
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(20);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    // Health and metrics are not rate-limited.
    expect((await fetch(`${stack.url}/healthz`)).status).toBe(200);
  });
});

describe('running cap', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { TETRALOOP_TENANT_MAX_RUNNING: '1' } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("keeps a tenant's run past its cap queued until a running one settles, then starts it", async () => {
    const first = await postRun(stack.url, {
      graph: graphOf({ id: 'w', kind: 'wait', signal: 'go', timeoutSeconds: 60 }),
    });
    const firstId = first.body.runId as string;
    await untilNodeStatus(stack, firstId, 'w', 'waiting');
    const jobs = await followJobEvents(stack, ['plan']);
    try {
      const second = await postRun(stack.url, { graph: graphOf(json('a')) });
      const secondId = second.body.runId as string;
      // Its root job parks: the tenant's one slot is taken.
      await jobs.next(
        (e) => e.event === 'delayed' && e.jobId === runJobId(secondId),
        Date.now() + 20_000,
        'the second run to wait for a slot',
      );
      const waiting = (await (await fetch(`${stack.url}/v1/runs/${secondId}`)).json()) as RunDocument;
      expect(waiting).toMatchObject({ status: 'queued', startedAt: null });

      expect((await post(stack.url, `/v1/runs/${firstId}/signals/go`, { ok: true })).status).toBe(202);
      const [a, b] = [await waitFor(stack.url, firstId), await waitFor(stack.url, secondId)];
      expect(a.status).toBe('succeeded');
      expect(b.status).toBe('succeeded');
      expect(Date.parse(b.startedAt!)).toBeGreaterThanOrEqual(Date.parse(a.finishedAt!));
    } finally {
      jobs.close();
    }
  });
});
