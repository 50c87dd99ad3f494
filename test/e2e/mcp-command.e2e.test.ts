/**
 * `tetraloop mcp` as an MCP client sees it: the real command as a child process, spoken to over
 * stdio by the official SDK's client, in front of a running stack (TETRALOOP_API_URL).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startModelServer, type ModelServer } from '../support/model-server.js';
import { TETRALOOP } from '../support/processes.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let model: ModelServer;
let client: Client;

beforeAll(async () => {
  model = await startModelServer({ script: () => ({ content: 'all done' }) });
  stack = await startStack({ env: { OPENAI_BASE_URL: model.url, TETRALOOP_MODEL_MAX_RETRIES: '0' } });
  client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [...TETRALOOP, 'mcp'],
      env: { TETRALOOP_API_URL: stack.url },
      stderr: 'ignore',
    }),
  );
});
afterAll(async () => {
  await client?.close();
  await stack?.close();
  await model?.close();
});

const call = (name: string, args: Record<string, unknown>) =>
  client.callTool({ name, arguments: args }) as Promise<CallToolResult>;

describe('tetraloop mcp', () => {
  it('offers the same tools as /mcp: run_graph, run_task, get_run, cancel_run and list_runs', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'cancel_run',
      'get_run',
      'list_runs',
      'run_graph',
      'run_task',
    ]);
    expect(tools.find((t) => t.name === 'run_graph')!.inputSchema).toMatchObject({ required: ['graph'] });
  });

  it('runs a graph to its end, telling its progress, and reads the run again', async () => {
    const progress: number[] = [];
    const ran = (await client.callTool(
      {
        name: 'run_graph',
        arguments: {
          graph: {
            nodes: [
              { id: 'a', kind: 'tool', tool: 'json', args: { value: { n: 41 } } },
              { id: 'b', kind: 'tool', tool: 'json', args: { value: { $ref: 'a.output' }, pick: 'n' } },
            ],
            edges: [['a', 'b']],
          },
        },
      },
      undefined,
      { onprogress: (p) => progress.push(p.progress) },
    )) as CallToolResult;
    expect(ran.isError).toBeFalsy();
    // The API's event stream, read by the command: one notification per node.
    expect(progress).toEqual([1, 2]);
    const doc = ran.structuredContent as {
      runId: string;
      status: string;
      nodes: Record<string, { output: unknown }>;
    };
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.b!.output).toBe(41);
    const read = await call('get_run', { runId: doc.runId });
    expect(read.structuredContent).toMatchObject({ runId: doc.runId, status: 'succeeded' });
  });

  it('answers an accepted run at once without wait', async () => {
    const ran = await call('run_graph', {
      graph: { nodes: [{ id: 'w', kind: 'tool', tool: 'wait', args: { ms: 10 } }] },
      wait: false,
    });
    expect(ran.structuredContent).toMatchObject({ status: 'queued' });
  });

  it('runs a task in the agent loop', async () => {
    const ran = await call('run_task', { task: 'say something', mode: 'loop', maxIterations: 2 });
    expect(ran.structuredContent).toMatchObject({
      status: 'succeeded',
      nodes: { agent: { output: { text: 'all done', stoppedBy: 'final' } } },
    });
  });

  it("passes the API's refusals on as tool errors", async () => {
    const bad = await call('run_graph', { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope' }] } });
    expect(bad.isError).toBe(true);
    expect((bad.content[0] as { text: string }).text).toMatch(
      /invalid_graph[\s\S]*graph\.nodes\.0\.tool: unknown tool "nope"/,
    );
    const missing = await call('get_run', { runId: 'no-such-run' });
    expect(missing.isError).toBe(true);
    expect((missing.content[0] as { text: string }).text).toContain('run_not_found');
  });
});
