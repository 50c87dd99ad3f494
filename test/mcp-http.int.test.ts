/**
 * `/mcp` as an MCP client sees it: the official SDK's `Client` over `StreamableHTTPClientTransport`
 * against the real API and worker pools, with keys required. Tools listed with their output
 * schemas (which the client checks every answer against), a planned task run with a progress
 * notification per node (strictly increasing, out of the plan's node count), the run document as
 * a resource, cancel and list, scopes, and tenants: no key is a 401, another tenant's run is not
 * found, a read-only key cannot start a run.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES, type Scope } from '@tetraloop/core/domain';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { startStack, type Stack } from './support/stack.js';

const ROOT = 'root-token-mcp-0123456789-0123456789-0123';
let stack: Stack;
let model: ModelServer;
const clients: Client[] = [];

/** The plan the planner answers every task with: two independent nodes and one joining them. */
const PLAN = {
  nodes: [
    { id: 'left', kind: 'tool', tool: 'json', args: { value: { n: 1 } } },
    { id: 'right', kind: 'tool', tool: 'json', args: { value: { n: 2 } } },
    {
      id: 'join',
      kind: 'tool',
      tool: 'json',
      args: { value: [{ $ref: 'left.output.n' }, { $ref: 'right.output.n' }] },
    },
  ],
  edges: [
    ['left', 'join'],
    ['right', 'join'],
  ],
};
const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

async function makeKey(tenant: string, scopes: readonly Scope[]): Promise<string> {
  const res = await fetch(`${stack.url}/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ROOT}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tenant, scopes, name: 'mcp-test' }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { key: string }).key;
}

const transportFor = (key: string | undefined): StreamableHTTPClientTransport =>
  new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
    ...(key ? { requestInit: { headers: { authorization: `Bearer ${key}` } } } : {}),
  });

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'tetraloop-test', version: '1.0.0' });
  await client.connect(transportFor(key));
  clients.push(client);
  return client;
}

const call = (client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
  client.callTool({ name, arguments: args }) as Promise<CallToolResult>;

const textOf = (result: CallToolResult): string => (result.content[0] as { text: string }).text;

let acme: Client;
let reader: Client;
let beta: Client;

beforeAll(async () => {
  model = await startModelServer({
    script: (request) => (isPlannerCall(request) ? { content: JSON.stringify(PLAN) } : { content: 'unused' }),
  });
  stack = await startStack({
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
    },
  });
  acme = await connect(await makeKey('acme', SCOPES));
  reader = await connect(await makeKey('acme', ['runs:read']));
  beta = await connect(await makeKey('beta', SCOPES));
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await stack?.close();
  await model?.close();
});

describe('MCP over streamable HTTP', () => {
  it('lists the five tools, each with its input and output schema, and the run resource template', async () => {
    const { tools } = await acme.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'cancel_run',
      'get_run',
      'list_runs',
      'run_graph',
      'run_task',
    ]);
    for (const tool of tools) expect(tool.outputSchema, tool.name).toMatchObject({ type: 'object' });
    expect(tools.find((t) => t.name === 'run_task')!.inputSchema).toMatchObject({ required: ['task'] });
    const { resourceTemplates } = await acme.listResourceTemplates();
    expect(resourceTemplates).toEqual([
      expect.objectContaining({ name: 'run', uriTemplate: 'tetraloop://runs/{runId}' }),
    ]);
  });

  let taskRun: string;

  it('runs a task, telling its progress node by node, and reads the run as a resource', async () => {
    const progress: Progress[] = [];
    const ran = (await acme.callTool(
      { name: 'run_task', arguments: { task: 'add one and two' } },
      undefined,
      {
        onprogress: (p) => progress.push(p),
      },
    )) as CallToolResult;
    expect(ran.isError, textOf(ran)).toBeFalsy();
    const doc = ran.structuredContent as {
      runId: string;
      status: string;
      nodes: Record<string, { output: unknown }>;
    };
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.join!.output).toEqual([1, 2]);
    taskRun = doc.runId;

    // One notification per node, each after the one before, out of the plan's three nodes.
    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3]);
    expect(progress.every((p) => p.total === 3)).toBe(true);
    expect(progress.at(-1)!.message).toBe('node join succeeded');
    expect(
      progress
        .slice(0, 2)
        .map((p) => p.message)
        .sort(),
    ).toEqual(['node left succeeded', 'node right succeeded']);

    const read = await acme.readResource({ uri: `tetraloop://runs/${taskRun}` });
    expect(read.contents).toHaveLength(1);
    const content = read.contents[0] as { uri: string; mimeType: string; text: string };
    expect(content.mimeType).toBe('application/json');
    expect(JSON.parse(content.text)).toMatchObject({ runId: taskRun, status: 'succeeded' });
  });

  it('runs a graph without waiting, cancels it, and finds it in the list', async () => {
    const started = await call(acme, 'run_graph', {
      graph: { nodes: [{ id: 'gate', kind: 'wait', signal: 'never', timeoutSeconds: 600 }] },
      wait: false,
    });
    expect(started.structuredContent).toMatchObject({ status: 'queued' });
    const runId = (started.structuredContent as { runId: string }).runId;
    const cancelled = await call(acme, 'cancel_run', { runId });
    expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({ runId });
    const settled = await call(acme, 'get_run', { runId });
    expect(settled.structuredContent).toMatchObject({ runId, status: 'cancelled' });

    const listed = await call(acme, 'list_runs', { limit: 10 });
    const ids = (listed.structuredContent as { runs: { runId: string }[] }).runs.map((r) => r.runId);
    expect(ids).toEqual(expect.arrayContaining([runId, taskRun]));
    const bad = await call(acme, 'list_runs', { since: 'last tuesday' });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/400 invalid_request[\s\S]*query\.since: must be an ISO time/);
  });

  it("answers an invalid graph as the tool's error, naming the field", async () => {
    const bad = await call(acme, 'run_graph', {
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope' }] },
    });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/400 invalid_graph[\s\S]*graph\.nodes\.0\.tool: unknown tool "nope"/);
  });

  it("does not show another tenant's run: not found as a tool and as a resource", async () => {
    const got = await call(beta, 'get_run', { runId: taskRun });
    expect(got.isError).toBe(true);
    expect(textOf(got)).toMatch(/^404 run_not_found/);
    const cancelled = await call(beta, 'cancel_run', { runId: taskRun });
    expect(textOf(cancelled)).toMatch(/^404 run_not_found/);
    const error = await beta.readResource({ uri: `tetraloop://runs/${taskRun}` }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32002);
    const listed = await call(beta, 'list_runs', {});
    expect((listed.structuredContent as { runs: unknown[] }).runs).toEqual([]);
  });

  it('lets a read-only key read, not start or cancel runs', async () => {
    expect((await call(reader, 'get_run', { runId: taskRun })).structuredContent).toMatchObject({
      status: 'succeeded',
    });
    const refused = await call(reader, 'run_task', { task: 'anything' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe('403 forbidden: the API key lacks the scope runs:write');
    expect(textOf(await call(reader, 'cancel_run', { runId: taskRun }))).toMatch(/^403 forbidden/);
  });

  it('refuses a client without a key, or with an unknown one, with HTTP 401', async () => {
    for (const key of [undefined, 'tl_0000000000000000_' + 'A'.repeat(43)]) {
      const client = new Client({ name: 'no-key', version: '1.0.0' });
      const error = await client.connect(transportFor(key)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StreamableHTTPError);
      expect((error as StreamableHTTPError).code).toBe(401);
      await client.close();
    }
  });
});
