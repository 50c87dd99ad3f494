/**
 * Session runs planned in windows (`TETRALOOP_SESSION_RUN_MODE=window`): when the session's
 * environment moves while a window runs, the planner is asked for the next window with the change,
 * and the run records why.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { post, startStack, untilEvent, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let model: ModelServer;
let tools: ToolServer;
const windowCalls: ChatRequest[] = [];
const isWindowCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'window';

beforeAll(async () => {
  tools = await startToolServer();
  model = await startModelServer({
    script: (r) => {
      if (!isWindowCall(r)) return { content: 'ok' };
      windowCalls.push(r);
      const asked = r.messages.at(-1)!.content!;
      // The first window fetches slowly; the one asked after the change says what changed.
      const window = asked.includes('environment_changed')
        ? {
            nodes: [{ id: 'after-change', kind: 'tool', tool: 'json', args: { value: 'changed' } }],
            edges: [],
            goalReached: true,
          }
        : asked.includes('window_drained')
          ? {
              nodes: [{ id: 'finish', kind: 'tool', tool: 'json', args: { value: 'as planned' } }],
              edges: [],
              goalReached: true,
            }
          : {
              nodes: [
                { id: 'slow', kind: 'tool', tool: 'http', args: { url: `${tools.url}/gate?node=slow` } },
              ],
              edges: [],
              goalReached: false,
            };
      return { content: JSON.stringify(window) };
    },
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_PLANNER_MODEL: 'scripted-planner',
      TETRALOOP_SESSION_RUN_MODE: 'window',
      TETRALOOP_ENV_CHECK_MS: '200',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_PLAN_CACHE: 'off',
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
  await tools?.close();
});

it('asks for the next window when the session environment moves, telling the planner what changed', async () => {
  const placed = (await post(stack.url, '/v1/sessions/win-a/messages', { text: 'report' })).body as {
    runId: string;
  };
  await tools.hitCount('slow', 1);
  const steer = await post(stack.url, '/v1/sessions/win-a/messages', {
    text: 'figures moved',
    mode: 'steer',
  });
  expect(steer.body).toMatchObject({ runId: placed.runId, queued: false });
  // The window winds down: its running node finishes, then the next window is asked.
  await untilEvent(stack.url, placed.runId, (e) => e.data.type === 'replan.requested', {
    what: 'replan.requested',
  });
  tools.openGate('slow');
  const doc = await waitFor(stack.url, placed.runId);
  expect(doc.status).toBe('succeeded');
  expect(doc.planning!.windows!.map((w) => [w.nodes, w.reason.split(':')[0]])).toEqual([
    [['slow'], 'start'],
    [['after-change'], 'environment_changed'],
  ]);
  expect(windowCalls).toHaveLength(2);
  expect(windowCalls[1]!.messages.at(-1)!.content).toContain('figures moved');
  expect(doc.output).toMatchObject({ 'after-change': 'changed' });
  expect(tools.hitsOf('slow')).toHaveLength(1);
});
