/** Plugin hooks around real tool calls: a rewrite, the deny-http plugin's block, an approval wait. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { loadPlugins } from '@tetraloop/core/hooks';
import {
  post,
  postRun,
  runToEnd,
  startStack,
  untilEvent,
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

it('a call that requires approval waits for its approval, whose nonce no one can post ahead', async () => {
  const posted = await postRun(stack.url, { graph: { nodes: [call('gated', 'gated')] } });
  const runId = posted.body.runId as string;
  // The old, guessable name and any guessed nonce are refused: nothing waits for them.
  for (const name of ['approve.gated', 'approve.gated.000000000000000000000000']) {
    const early = await post(stack.url, `/v1/runs/${runId}/signals/${name}`, { approved: true });
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({ error: { code: 'signal_not_awaited' } });
  }
  await untilNodeStatus(stack, runId, 'gated', 'waiting');
  expect(server.hitsOf('gated')).toHaveLength(0);
  // The approver finds the name on the waiting node (and in its signal.awaited event).
  const waiting = (await fetch(`${stack.url}/v1/runs/${runId}`).then((r) => r.json())) as RunDocument;
  const name = (waiting.nodes.gated as { signal?: string }).signal!;
  expect(name).toMatch(/^approve\.gated\.[0-9a-f]{24}$/);
  expect(waiting.nodes.gated!.waits).toEqual([
    expect.objectContaining({ signal: name, approval: { tool: 'http', reason: 'a person must approve' } }),
  ]);
  const awaited = await untilEvent(stack.url, runId, (e) => e.data.type === 'signal.awaited');
  expect(awaited.data).toMatchObject({ nodeId: 'gated', data: { signal: name } });

  expect((await post(stack.url, `/v1/runs/${runId}/signals/${name}`, { approved: true })).status).toBe(202);
  const doc = await waitFor(stack.url, runId);
  expect(doc.status).toBe('succeeded');
  expect(server.hitsOf('gated')).toHaveLength(1);
  expect(doc.nodes.gated!.waits).toEqual([
    expect.objectContaining({
      signal: name,
      decidedBy: expect.objectContaining({ keyId: null, tenant: 'default' }),
    }),
  ]);
});
