/**
 * Session runs planned as DAGs: the plan loop's environment check replans a running run only
 * when its session's environment version moved, and records the version each plan saw; a node of
 * the outdated plan still queued when the environment moved does not start, and runs under the new
 * plan instead.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { post, readEvents, startStack, untilEvent, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let model: ModelServer;
let tools: ToolServer;
const plannerCalls: ChatRequest[] = [];

beforeAll(async () => {
  tools = await startToolServer();
  model = await startModelServer({
    script: (r) => {
      plannerCalls.push(r);
      const replanning = r.messages.at(-1)!.content!.includes('environment changed');
      if (r.messages.some((m) => m.content?.includes('gated report'))) return gatedPlan(replanning);
      // A steered run's `slow` is held until the test has seen the replan requested.
      const slow = r.messages.some((m) => m.content?.includes('steered report'))
        ? `${tools.url}/gate?node=slow`
        : `${tools.url}/work?node=slow&ms=700`;
      return {
        content: JSON.stringify({
          nodes: [
            { id: 'slow', kind: 'tool', tool: 'http', args: { url: slow } },
            {
              id: replanning ? 'after-change' : 'finish',
              kind: 'tool',
              tool: 'json',
              args: { value: replanning ? 'changed' : 'as planned' },
            },
          ],
          edges: [['slow', replanning ? 'after-change' : 'finish']],
        }),
      };
    },
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_SESSION_RUN_MODE: 'dag',
      // One node at a time: a second ready node waits in the queue while the first runs.
      TETRALOOP_TOOL_CONCURRENCY: '1',
      TETRALOOP_ENV_CHECK_MS: '200',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Both sessions are asked the same; each run's planner calls are counted.
      TETRALOOP_PLAN_CACHE: 'off',
    },
  });
});
/**
 * `gate` (first, by priority) holds the only tool slot until the test opens it; `report` waits in
 * the queue behind it. The replan keeps `gate` and changes what `report` fetches.
 */
function gatedPlan(replanning: boolean): { content: string } {
  return {
    content: JSON.stringify({
      nodes: [
        {
          id: 'gate',
          kind: 'tool',
          tool: 'http',
          args: { url: `${tools.url}/gate?node=gate` },
          priority: 10,
        },
        {
          id: 'report',
          kind: 'tool',
          tool: 'http',
          args: { url: `${tools.url}/echo?node=report&env=${replanning ? 'new' : 'old'}` },
          priority: 1,
        },
      ],
      edges: [],
    }),
  };
}

afterAll(async () => {
  await stack?.close();
  await model?.close();
  await tools?.close();
});

it('does not replan while the environment version stays put', async () => {
  const placed = (await post(stack.url, '/v1/sessions/dag-a/messages', { text: 'report' })).body as {
    runId: string;
  };
  const doc = await waitFor(stack.url, placed.runId);
  expect(doc.status).toBe('succeeded');
  expect(doc.output).toEqual({ finish: 'as planned' });
  expect(doc.replans).toBe(0);
  expect(plannerCalls).toHaveLength(1);
});

it('replans a running run once its session environment moved, recording the version', async () => {
  const before = plannerCalls.length;
  const hitsBefore = tools.hitsOf('slow').length;
  const placed = (await post(stack.url, '/v1/sessions/dag-b/messages', { text: 'steered report' })).body as {
    runId: string;
  };
  await tools.hitCount('slow', hitsBefore + 1);
  const steer = await post(stack.url, '/v1/sessions/dag-b/messages', {
    text: 'use the new numbers',
    mode: 'steer',
  });
  expect(steer.body).toMatchObject({ runId: placed.runId, queued: false });
  await untilEvent(stack.url, placed.runId, (e) => e.data.type === 'replan.requested', {
    what: 'replan.requested',
  });
  tools.openGate('slow');
  const doc = await waitFor(stack.url, placed.runId);
  expect(doc.status).toBe('succeeded');
  expect(doc.replans).toBe(1);
  expect(doc.output).toEqual({ 'after-change': 'changed' });
  expect(doc.planning).toMatchObject({ planVersion: 1, environmentVersion: 1 });
  expect(plannerCalls.length - before).toBe(2);
  expect(plannerCalls.at(-1)!.messages.at(-1)!.content).toContain('use the new numbers');
  // The slow node had completed before the replan and was reused, not run again.
  expect(tools.hitsOf('slow').length - hitsBefore).toBe(1);
});

it('does not start a queued node of a plan the environment moved past: the new plan runs it', async () => {
  const placed = (await post(stack.url, '/v1/sessions/dag-c/messages', { text: 'gated report' })).body as {
    runId: string;
  };
  // `gate` runs and holds the tool slot; `report`, planned on environment version 0, is queued.
  await tools.hitCount('gate', 1);
  await post(stack.url, '/v1/sessions/dag-c/messages', { text: 'figures moved', mode: 'steer' });
  await untilEvent(stack.url, placed.runId, (e) => e.data.type === 'replan.requested', {
    what: 'replan.requested',
  });
  tools.openGate('gate');
  const doc = await waitFor(stack.url, placed.runId);
  expect(doc.status).toBe('succeeded');
  expect(doc.replans).toBe(1);
  // `report` ran once, with what the new plan asked for; the outdated one never reached the host.
  expect(tools.hitsOf('report')).toHaveLength(1);
  expect(JSON.stringify(doc.output)).toContain('"env":"new"');
  const events = (await readEvents(stack.url, placed.runId)).map((e) => e.data);
  const deferred = events.find((e) => e.type === 'node.deferred');
  expect(deferred).toMatchObject({
    nodeId: 'report',
    data: { reason: 'environment_changed', planEnvironmentVersion: 0, environmentVersion: 1 },
  });
  // Deferred before the new plan was installed; started only after it.
  const seqOf = (type: string, nodeId?: string): number[] =>
    events.filter((e) => e.type === type && (nodeId === undefined || e.nodeId === nodeId)).map((e) => e.seq);
  expect(seqOf('node.started', 'report')).toHaveLength(1);
  expect(seqOf('node.started', 'report')[0]).toBeGreaterThan(seqOf('plan').at(-1)!);
  // The gate node finished before the replan and was reused, not run again.
  expect(tools.hitsOf('gate')).toHaveLength(1);
});
