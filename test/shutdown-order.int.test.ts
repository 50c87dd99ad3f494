/**
 * Shutdown from the innermost loop outward: the tool pool stops first and its active node is
 * given its grace to finish, then plan, sense and reflect — each closing only after the one
 * inside it has.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postRun, startStack, untilNodeStatus, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let tools: ToolServer;

beforeAll(async () => {
  tools = await startToolServer();
  stack = await startStack({ pools: ['sense', 'plan', 'tool', 'reflect'] });
});
afterAll(async () => {
  await stack?.close();
  await tools?.close();
});

it('closes tool, plan, sense, reflect in turn, letting the running node finish first', async () => {
  const posted = await postRun(stack.url, {
    graph: {
      nodes: [
        { id: 'slow', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=slow&ms=400` } },
      ],
    },
  });
  await untilNodeStatus(stack, posted.body.runId as string, 'slow', 'running');
  const closed: string[] = [];
  for (const [pool, workers] of stack.pools!.workers) {
    for (const worker of workers) worker.on('closed', () => closed.push(pool));
  }
  await stack.pools!.close();
  const order = closed.filter((pool, i) => closed.indexOf(pool) === i);
  expect(order).toEqual(['tool', 'plan', 'sense', 'reflect']);
  // The node in flight finished within the grace: its call was answered, not cut.
  expect(tools.hitsOf('slow')[0]).toMatchObject({ status: 200 });
  expect(tools.hitsOf('slow')[0]!.end).toBeDefined();
});
