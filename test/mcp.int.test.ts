/**
 * MCP servers as tools, against a real MCP server this project did not write:
 * `@modelcontextprotocol/server-everything`, started by the workers over stdio through the SDK.
 * Fixed graphs, the agent loop and the planner call its tools; args are checked against its
 * schemas (by the API, which knows them from the lists workers publish to Redis); a server that
 * cannot be reached fails its tools with `network` and leaves the worker up.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPlugins } from '@tetraloop/core/hooks';
import { createLogger } from '@tetraloop/core/logging';
import { McpServers, serverCatalog } from '@tetraloop/core/mcp';
import { connectRedis, followMcpCatalog } from '@tetraloop/core/runtime';
import { McpCatalogStore } from '@tetraloop/core/state';
import { metrics } from '@tetraloop/core/telemetry';
import { builtinTools, parseAllowHosts, toolCatalog } from '@tetraloop/core/tools';
import {
  scriptedModelEnv,
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { postRun, readEvents, runToEnd, startStack, type Stack } from './support/stack.js';
import { parseWorkerEnv, startPools } from '@tetraloop/workers';

/** server-everything's executable (its package's `bin`), run with this Node over stdio. */
function everythingBin(): string {
  const manifest = createRequire(import.meta.url).resolve(
    '@modelcontextprotocol/server-everything/package.json',
  );
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> };
  return join(dirname(manifest), bin['mcp-server-everything']!);
}

/** A free loopback port (free when asked: the HTTP server takes it again after a restart). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** server-everything over streamable HTTP on `port`, once it listens. */
async function startHttpServer(port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [everythingBin(), 'streamableHttp'], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let said = '';
    child.stderr.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      if (said.includes('listening on port')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited (${code}): ${said}`)));
  });
  return child;
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

let httpPort: number;
let httpServer: ChildProcess | undefined;
const servers: Record<string, unknown>[] = [
  { name: 'everything', command: process.execPath, args: [everythingBin(), 'stdio'] },
  // Exits at once: never reachable.
  { name: 'broken', command: process.execPath, args: ['-e', 'process.exit(3)'] },
];

let stack: Stack;
let model: ModelServer;
const afterCalls: { tool: string; ok: boolean }[] = [];

let planner: (request: ChatRequest) => ScriptedReply = () => ({ content: '{}' });
let agent: (request: ChatRequest) => ScriptedReply = () => ({ content: 'done' });
const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

beforeAll(async () => {
  httpPort = await freePort();
  httpServer = await startHttpServer(httpPort);
  servers.push({
    name: 'remote',
    url: `http://127.0.0.1:${httpPort}/mcp`,
    headers: { 'x-from': 'tetraloop' },
  });
  model = await startModelServer({ script: (r) => (isPlannerCall(r) ? planner(r) : agent(r)) });
  const registry = await loadPlugins([], {});
  // The same hooks as any tool's: a rewrite of one node's args, and a record of every call.
  registry.on('before_tool_call', ({ nodeId, args }) =>
    nodeId === 'hooked' ? { args: { ...(args as object), message: 'rewritten by a hook' } } : undefined,
  );
  registry.on('after_tool_call', ({ tool, ok }) => {
    afterCalls.push({ tool, ok });
  });
  stack = await startStack({
    hooks: { registry },
    env: {
      TETRALOOP_MCP_SERVERS: JSON.stringify(servers),
      TETRALOOP_MCP_RECONNECT_MIN_MS: '200',
      TETRALOOP_MCP_RECONNECT_MAX_MS: '1000',
      ...scriptedModelEnv(model),
      TETRALOOP_AGENT_TOOLS: JSON.stringify({
        echoer: ['json', 'mcp.everything.echo'],
        any: ['mcp.everything.*'],
      }),
      TETRALOOP_RETRIES: JSON.stringify({ network: 1, timeout: 0 }),
      TETRALOOP_BACKOFF_BASE_MS: '500',
      TETRALOOP_BACKOFF_MAX_MS: '1000',
      TETRALOOP_BACKOFF_JITTER: '0',
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
  await stop(httpServer);
});

const call = (
  id: string,
  tool: string,
  args: Record<string, unknown>,
  more: Record<string, unknown> = {},
) => ({
  id,
  kind: 'tool',
  tool: `mcp.everything.${tool}`,
  args,
  ...more,
});

describe('a fixed graph', () => {
  it('calls tools of the server, one taking the output of another', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          call('sum', 'get-sum', { a: 2, b: 3 }),
          call('echo', 'echo', { message: '{{sum.output.text}}' }),
          call('weather', 'get-structured-content', { location: 'Chicago' }),
          call('hooked', 'echo', { message: 'original' }),
        ],
        edges: [['sum', 'echo']],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.sum).toMatchObject({
      status: 'succeeded',
      output: { text: 'The sum of 2 and 3 is 5.' },
    });
    expect(doc.nodes.echo).toMatchObject({ output: { text: 'Echo: The sum of 2 and 3 is 5.' } });
    expect(doc.nodes.weather).toMatchObject({
      output: { structured: { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 } },
    });
    expect(doc.nodes.hooked).toMatchObject({ output: { text: 'Echo: rewritten by a hook' } });
    expect(doc.usage.toolCalls).toBe(4);
    expect(afterCalls).toContainEqual({ tool: 'mcp.everything.get-sum', ok: true });
    const events = await readEvents(stack.url, doc.runId);
    expect(events.map((e) => e.data)).toContainEqual(
      expect.objectContaining({
        type: 'node.succeeded',
        nodeId: 'echo',
        data: expect.objectContaining({ tool: 'mcp.everything.echo' }),
      }),
    );
  });

  it('is refused when args miss the tool schema, each problem at its exact path', async () => {
    const res = await postRun(stack.url, {
      graph: {
        nodes: [
          call('sum', 'get-sum', { a: 1, b: 'two' }),
          call('echo', 'echo', {}),
          call('weather', 'get-structured-content', { location: 'Paris' }),
          call('nope', 'no-such-tool', {}),
        ],
      },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_graph' });
    const issues = (res.body.error as { issues: { path: string; message: string }[] }).issues;
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: 'graph.nodes.0.args.b', message: 'must be number' },
        { path: 'graph.nodes.1.args.message', message: 'is required' },
        { path: 'graph.nodes.2.args.location', message: 'must be equal to one of the allowed values' },
        expect.objectContaining({
          path: 'graph.nodes.3.tool',
          message: expect.stringMatching(
            /^unknown tool "mcp\.everything\.no-such-tool"; known tools: .*mcp\.everything\.echo/,
          ),
        }),
      ]),
    );
    expect(issues).toHaveLength(4);
  });

  it('fails a call past its node timeout as timeout', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          call('slow', 'trigger-long-running-operation', { duration: 5, steps: 5 }, { timeoutMs: 300 }),
        ],
      },
    });
    expect(doc.nodes.slow).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
  });
});

describe('the allowlists', () => {
  it('hold MCP tools by name, or all of a server by mcp.<server>.*', async () => {
    const sum = call('sum', 'get-sum', { a: 1, b: 2 });
    const refused = await postRun(stack.url, { agentId: 'echoer', graph: { nodes: [sum] } });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({
      issues: [
        {
          path: 'graph.nodes.0.tool',
          message: 'tool "mcp.everything.get-sum" is not allowed for this agent',
        },
      ],
    });
    const wild = await runToEnd(stack.url, { agentId: 'any', graph: { nodes: [sum] } });
    expect(wild.status).toBe('succeeded');
    // A loop-mode run offers the model exactly the agent's tools.
    const before = model.requests.length;
    agent = () => ({ content: 'nothing to do' });
    await runToEnd(stack.url, { agentId: 'echoer', task: 'anything', mode: 'loop' });
    const offered = (model.requests[before]!.tools as { function: { name: string } }[]).map(
      (t) => t.function.name,
    );
    expect(offered.sort()).toEqual(['json', 'mcp__everything__echo']);
  });
});

describe('a server that cannot be reached', () => {
  it('fails its tools with network, retried as network is, and the worker stays up', async () => {
    // Tried again every second at most: down, or connecting for a moment.
    expect(stack.pools!.mcp.connections.get('broken')!.status).not.toBe('connected');
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 'down', kind: 'tool', tool: 'mcp.broken.echo', args: { message: 'x' } }] },
    });
    expect(doc.status).toBe('failed');
    expect(doc.nodes.down).toMatchObject({ status: 'failed', error: { code: 'network' } });
    expect((doc.nodes.down as { error: { message: string } }).error.message).toMatch(
      /MCP server "broken" is not connected/,
    );
    // TETRALOOP_RETRIES gives network one retry.
    expect(doc.nodes.down!.attempts).toHaveLength(2);
    expect(await stack.pools!.ready()).toBe(true);
    const connected = (await metrics.mcpServerConnected.get()).values;
    expect(connected).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ labels: { server: 'everything' }, value: 1 }),
        expect.objectContaining({ labels: { server: 'broken' }, value: 0 }),
      ]),
    );
    const after = await runToEnd(stack.url, {
      graph: { nodes: [call('echo', 'echo', { message: 'still here' })] },
    });
    expect(after.nodes.echo).toMatchObject({ output: { text: 'Echo: still here' } });
  });
});

describe('a streamable HTTP server', () => {
  it('is called like a stdio one, and connected again after it restarts', async () => {
    const sum = {
      id: 'sum',
      kind: 'tool',
      tool: 'mcp.remote.get-sum',
      args: { a: 1, b: 1 },
      retry: { network: 3 },
    };
    const first = await runToEnd(stack.url, { graph: { nodes: [sum] } });
    expect(first.nodes.sum).toMatchObject({
      status: 'succeeded',
      output: { text: 'The sum of 1 and 1 is 2.' },
    });

    // The restarted server knows nothing of the worker's session: the next call is refused, the
    // worker connects again, and the node's network retries find the new connection.
    await stop(httpServer);
    httpServer = await startHttpServer(httpPort);
    const again = await runToEnd(stack.url, { graph: { nodes: [sum] } });
    expect(again.nodes.sum).toMatchObject({
      status: 'succeeded',
      output: { text: 'The sum of 1 and 1 is 2.' },
    });
    const attempts = again.nodes.sum!.attempts as { error?: { code: string } }[];
    expect(attempts.length).toBeGreaterThan(1);
    expect(attempts[0]!.error).toMatchObject({ code: 'network' });
    expect(stack.pools!.mcp.connections.get('remote')!.status).toBe('connected');
  });
});

describe('the agent loop', () => {
  it('calls the tool the model asks for, shown to the model under a function name its API accepts', async () => {
    const before = model.requests.length;
    agent = (r) => {
      const result = r.messages.find((m) => m.role === 'tool');
      return result
        ? { content: `the server said ${result.content}` }
        : {
            content: '',
            toolCalls: [{ name: 'mcp.everything.echo', arguments: { message: 'from the agent' } }],
          };
    };
    const doc = await runToEnd(stack.url, { task: 'echo something', mode: 'loop' });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.agent).toMatchObject({ output: { iterations: 2, stoppedBy: 'final' } });
    expect((doc.nodes.agent as { output: { text: string } }).output.text).toContain('Echo: from the agent');
    expect(doc.usage.toolCalls).toBe(1);
    const first = model.requests[before]!;
    const echo = (first.tools as { function: { name: string; parameters: unknown } }[]).find(
      (t) => t.function.name === 'mcp__everything__echo',
    );
    expect(echo?.function.parameters).toMatchObject({
      properties: { message: { type: 'string' } },
      required: ['message'],
    });
    const events = await readEvents(stack.url, doc.runId);
    expect(events.map((e) => e.data)).toContainEqual(
      expect.objectContaining({
        type: 'tool.result',
        data: expect.objectContaining({ tool: 'mcp.everything.echo', ok: true }),
      }),
    );
  });
});

describe('the planner', () => {
  it('sees the server tools in its catalog and plans with them', async () => {
    const before = model.requests.length;
    planner = () => ({
      content: JSON.stringify({
        nodes: [{ id: 'sum', kind: 'tool', tool: 'mcp.everything.get-sum', args: { a: 20, b: 22 } }],
        edges: [],
      }),
    });
    const doc = await runToEnd(stack.url, { task: 'add 20 and 22' });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.sum).toMatchObject({ output: { text: 'The sum of 20 and 22 is 42.' } });
    const system = model.requests[before]!.messages[0]!.content!;
    expect(system).toContain('"mcp.everything.get-sum"');
    expect(doc.planning).toMatchObject({ toolCatalogVersion: toolCatalog(stack.pools!.mcp.tools).version });
  });
});

describe('the tool lists in Redis', () => {
  it('give a worker without the tool pool the tools, without a connection of its own', async () => {
    const planOnly = await startPools(parseWorkerEnv(stack.env), { pools: ['plan'] });
    try {
      expect(planOnly.mcp.connections.size).toBe(0);
      expect(planOnly.mcp.tools.version('everything')).toBe(stack.pools!.mcp.tools.version('everything'));
      expect(toolCatalog(planOnly.mcp.tools).version).toBe(toolCatalog(stack.pools!.mcp.tools).version);
    } finally {
      await planOnly.close();
    }
  });

  it('hold what the workers listed, and the API follows each change a worker publishes', async () => {
    const redis = new Redis(stack.env.REDIS_URL!);
    const subscriber = connectRedis(stack.env.REDIS_URL!, 'subscriber', 'tetraloop-test-mcp-follow');
    const store = new McpCatalogStore(redis, stack.prefix);
    const workerTools = stack.pools!.mcp.tools;
    try {
      expect((await store.read('everything'))?.version).toBe(workerTools.version('everything'));
      const followed = await followMcpCatalog({
        servers: McpServers.parse([...servers, { name: 'later', command: 'unused' }]),
        builtins: builtinTools({ egress: parseAllowHosts('') }),
        store,
        subscriber,
        logger: createLogger({ level: 'silent', layer: 'api', redact: [] }),
      });
      expect(followed.tools.version('everything')).toBe(workerTools.version('everything'));
      expect(toolCatalog(followed.tools).version).toBe(toolCatalog(workerTools).version);
      // A server nobody has listed yet: its tools pass unchecked, none is in the catalog.
      expect(followed.tools.has('mcp.later.anything')).toBe(true);
      const catalogBefore = toolCatalog(followed.tools).version;

      const changed = new Promise<string>((resolve) => followed.tools.onChange((server) => resolve(server)));
      await store.publish(
        'later',
        serverCatalog([
          { name: 'ping', description: 'Pings', inputSchema: { type: 'object', properties: {} } },
        ]),
      );
      expect(await changed).toBe('later');
      expect(followed.tools.has('mcp.later.ping')).toBe(true);
      expect(followed.tools.has('mcp.later.anything')).toBe(false);
      expect(toolCatalog(followed.tools).version).not.toBe(catalogBefore);
      await followed.close();
    } finally {
      subscriber.disconnect();
      redis.disconnect();
    }
  });
});
