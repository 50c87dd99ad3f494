/** Plugin hooks around real tool calls: a rewrite, the deny-http plugin's block, an approval wait. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadPlugins } from '@tetraloop/core';
import {
  post,
  postRun,
  runToEnd,
  startStack,
  untilNodeStatus,
  waitFor,
  type Stack,
} from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let server: ToolServer;
const observed: { nodeId: string; ok: boolean }[] = [];

beforeAll(async () => {
  server = await startToolServer();
  const registry = await loadPlugins(['deny-http'], { TETRALOOP_HTTP_DENY_PATTERN: 'node=forbidden' });
  registry.on('before_tool_call', ({ nodeId, args }) => {
    if (nodeId === 'rewritten')
      return { args: { ...(args as object), url: `${server.url}/work?node=rewritten-target&ms=1` } };
    if (nodeId === 'gated') return { requireApproval: 'a person must approve' };
    return undefined;
  });
  registry.on('after_tool_call', ({ nodeId, ok }) => {
    observed.push({ nodeId, ok });
  });
  stack = await startStack({ hooks: { registry } });
});
afterAll(async () => {
  await stack?.close();
  await server?.close();
});

const call = (id: string, node: string) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/work?node=${node}&ms=1` },
});

it('before_tool_call rewrites the args of a call', async () => {
  const doc = await runToEnd(stack.url, { graph: { nodes: [call('rewritten', 'original')] } });
  expect(doc.status).toBe('succeeded');
  expect(server.hitsOf('original')).toHaveLength(0);
  expect(server.hitsOf('rewritten-target')).toHaveLength(1);
  expect(observed).toContainEqual({ nodeId: 'rewritten', ok: true });
});

it('before_tool_call blocks a call with a reason (the deny-http plugin)', async () => {
  const doc = await runToEnd(stack.url, { graph: { nodes: [call('denied', 'forbidden')] } });
  expect(doc.status).toBe('failed');
  expect(doc.nodes.denied).toMatchObject({ status: 'failed', error: { code: 'validation' } });
  expect((doc.nodes.denied as { error: { message: string } }).error.message).toMatch(
    /^blocked: URL matches the deny pattern/,
  );
  expect(server.hitsOf('forbidden')).toHaveLength(0);
});

it('a call that requires approval waits for the approval signal', async () => {
  const posted = await postRun(stack.url, { graph: { nodes: [call('gated', 'gated')] } });
  const runId = posted.body.runId as string;
  await untilNodeStatus(stack, runId, 'gated', 'waiting');
  expect(server.hitsOf('gated')).toHaveLength(0);
  expect((await post(stack.url, `/v1/runs/${runId}/signals/approve.gated`, { approved: true })).status).toBe(
    202,
  );
  const doc = await waitFor(stack.url, runId);
  expect(doc.status).toBe('succeeded');
  expect(server.hitsOf('gated')).toHaveLength(1);
});
