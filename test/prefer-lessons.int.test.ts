/**
 * Prefer lessons on a real Redis with the plan, tool and reflect pools, a scripted
 * OpenAI-compatible planner and the default lesson lifecycle: a task whose step failed with one
 * tool (http to a broken host) and succeeded with another (json) makes a `prefer` lesson, on
 * probation first (the planner's prompt and catalog unchanged), active once later runs support
 * it; then the planner's catalog lists the preferred tool first, and its prompt says why. A soft
 * lesson still on probation stays out of the prompt.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lessonId, type Lesson } from '@tetraloop/core/memory';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { runToEnd, startStack, withReflection, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let model: ModelServer;
let broken: ToolServer;
/** What the planner answers for the step `price`: a call of the broken host, or the json tool. */
let choice: 'http' | 'json' = 'http';
let runs = 0;

const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

beforeAll(async () => {
  broken = await startToolServer();
  model = await startModelServer({
    script: () => {
      runs += 1;
      const price =
        choice === 'http'
          ? {
              id: 'price',
              kind: 'tool',
              tool: 'http',
              args: { url: `${broken.url}/status/404?node=p${runs}` },
            }
          : { id: 'price', kind: 'tool', tool: 'json', args: { value: 42 } };
      return { content: JSON.stringify({ nodes: [price], edges: [] }) };
    },
  });
  stack = await startStack({
    pools: ['plan', 'tool', 'reflect'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_PLANNER_MODEL: 'scripted-planner',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Every run asks the planner (no plan cache), reads lessons at once, and each third settled
      // run asks for a reflection: the test knows when each one happens. The lifecycle is the default.
      TETRALOOP_PLAN_CACHE: 'off',
      TETRALOOP_LESSON_REFRESH_MS: '0',
      TETRALOOP_REFLECT_EVERY_RUNS: '3',
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
  await broken?.close();
});

const agentId = 'ranker';
const task = { task: 'get the price', agentId };
const lessonsOf = async (): Promise<{ version: number; lessons: Lesson[] }> =>
  (await fetch(`${stack.url}/v1/agents/${agentId}/lessons`).then((r) => r.json())) as {
    version: number;
    lessons: Lesson[];
  };
/** The system prompt of the planner call made since request `since`. */
const plannerPrompt = (since: number): string => {
  const calls = model.requests.slice(since).filter(isPlannerCall);
  expect(calls).toHaveLength(1);
  return calls[0]!.messages[0]!.content!;
};
/** Where each tool stands in the catalog a prompt lists. */
const at = (prompt: string, tool: string): number => prompt.indexOf(`{"name":"${tool}"`);

describe('prefer lessons', () => {
  it('prefers the tool that worked for a step, after its probation: first in the catalog, a line in the prompt', async () => {
    /** Three runs of the task with the planner choosing `tool`, and the reflection the third asks for. */
    const threeRuns = async (tool: typeof choice, status: string, check?: (since: number) => void) => {
      choice = tool;
      await withReflection(stack, agentId, async () => {
        for (let i = 0; i < 3; i++) {
          const since = model.requests.length;
          expect((await runToEnd(stack.url, task)).status).toBe(status);
          check?.(since);
        }
      });
    };

    // The step fails with http to the broken host (404: a validation error, so no hard lesson)…
    await threeRuns('http', 'failed');
    // …and works with json. The reflection after these proposes the preference, on probation.
    await threeRuns('json', 'succeeded', (since) =>
      expect(at(plannerPrompt(since), 'http')).toBeGreaterThan(0),
    );
    const host = new URL(broken.url).host;
    const id = lessonId(agentId, 'prefer', { tool: 'json', overTool: 'http', overHost: host });
    const flaky = lessonId(agentId, 'service-flaky', { tool: 'http', host });
    const proposed = await lessonsOf();
    expect(proposed.version).toBe(0);
    expect(proposed.lessons.map((l) => [l.id, l.kind, l.status]).sort()).toEqual(
      [
        [id, 'prefer', 'probation'],
        [flaky, 'soft', 'probation'],
      ].sort(),
    );
    expect(proposed.lessons.find((l) => l.id === id)).toMatchObject({
      scope: { tool: 'json', overTool: 'http', overHost: host },
      statement: expect.stringMatching(new RegExp(`^prefer json over http \\(${host}\\)`)),
    });

    // On probation, neither lesson has an effect: the catalog is in name order and the prompt has
    // no lessons. These runs, ended after the proposal, support the preference; the reflection
    // the third asks for puts it in effect. The soft lesson has no new failure: still on probation.
    await threeRuns('json', 'succeeded', (since) => {
      const prompt = plannerPrompt(since);
      expect(at(prompt, 'http')).toBeLessThan(at(prompt, 'json'));
      expect(prompt).not.toContain('## Lessons');
    });
    const active = await lessonsOf();
    expect(active.version).toBe(1);
    expect(Object.fromEntries(active.lessons.map((l) => [l.id, l.status]))).toEqual({
      [id]: 'active',
      [flaky]: 'probation',
    });
    const lesson = active.lessons.find((l) => l.id === id)!;

    // In effect: json comes before http in the catalog the planner is sent, and its prompt says why.
    const since = model.requests.length;
    const doc = await runToEnd(stack.url, task);
    const prompt = plannerPrompt(since);
    expect(at(prompt, 'json')).toBeGreaterThan(0);
    expect(at(prompt, 'json')).toBeLessThan(at(prompt, 'http'));
    expect(prompt).toContain(`## Lessons (learned from earlier runs)\n- ${lesson.statement}`);
    expect(prompt).not.toContain('often fails');
    expect(doc.planning).toMatchObject({ lessonsVersion: 1, lessons: [id] });
  });
});
