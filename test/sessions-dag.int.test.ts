/**
 * Session runs planned as DAGs: the plan loop's environment check replans a running run only
 * when its session's environment version moved, and records the version each plan saw.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { post, startStack, waitFor, type Stack } from './support/stack.js';
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
      return {
        content: JSON.stringify({
          nodes: [
            { id: 'slow', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=slow&ms=700` } },
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
      TETRALOOP_ENV_CHECK_MS: '200',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Both sessions are asked the same; each run's planner calls are counted.
      TETRALOOP_PLAN_CACHE: 'off',
    },
  });
});
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
  const placed = (await post(stack.url, '/v1/sessions/dag-b/messages', { text: 'report' })).body as {
    runId: string;
  };
  await tools.hitCount('slow', hitsBefore + 1);
  const steer = await post(stack.url, '/v1/sessions/dag-b/messages', {
    text: 'use the new numbers',
    mode: 'steer',
  });
  expect(steer.body).toMatchObject({ runId: placed.runId, queued: false });
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
