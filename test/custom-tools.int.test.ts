/**
 * Custom tools on real worker processes: `tetraloop worker --pool tool --tools <module> --queues …`
 * serves the tools of `fixtures/tools/tools.ts`; the API and the plan pool (with a tool pool that
 * has none of their code) run in this process. The tools call a loopback server that records what
 * each call sent.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { spawnTetraloop, stderrMatches, type Spawned } from './support/processes.js';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { postRun, readEvents, startStack, waitFor, type Stack } from './support/stack.js';

const MODULE = fileURLToPath(new URL('./fixtures/tools/tools.ts', import.meta.url));
const KEY = randomBytes(32).toString('base64');
const TOKEN = `crm-${randomBytes(8).toString('hex')}`;

interface Hit {
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingMessage['headers'];
}

/** The loopback "CRM" and "GPU": records every request; a render is held until released. */
class Loopback {
  readonly hits: Hit[] = [];
  /** Answers of `/crm/customers`, in turn (then 200). */
  crmStatuses: number[] = [];
  private held: (() => void)[] = [];
  holdRenders = false;
  server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      this.hits.push({ path: url.pathname, query: url.searchParams, headers: req.headers });
      const json = (status: number, body: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      if (url.pathname === '/crm/customers') {
        const status = this.crmStatuses.shift() ?? 200;
        if (status !== 200) return json(status, { error: 'busy' });
        return json(200, { id: 'c-1', name: 'Ada Lovelace', plan: 'pro', extra: 'dropped' });
      }
      if (url.pathname === '/gpu/render') {
        const answer = (): void => json(200, { image: `img:${url.searchParams.get('scene')}` });
        if (this.holdRenders) this.held.push(answer);
        else answer();
        return;
      }
      json(200, {});
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  releaseRenders(): void {
    this.holdRenders = false;
    for (const answer of this.held.splice(0)) answer();
  }

  hitsOf(path: string): Hit[] {
    return this.hits.filter((h) => h.path === path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

let stack: Stack;
let loopback: Loopback;
let model: ModelServer;
let planner: (request: ChatRequest) => ScriptedReply = () => ({ content: '{}' }); // eslint-disable-line prefer-const
const workers: Spawned[] = [];

const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

beforeAll(async () => {
  loopback = new Loopback();
  await loopback.start();
  model = await startModelServer({
    script: (request) => (isPlannerCall(request) ? planner(request) : { content: 'ok' }),
  });
  stack = await startStack({
    pools: ['plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL: 'scripted-node',
      TETRALOOP_PLANNER_MODEL: 'scripted-planner',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_SECRET_KEY: KEY,
      TETRALOOP_TOOL_HEARTBEAT_MS: '500',
      TETRALOOP_STALLED_INTERVAL_MS: '1000',
      TETRALOOP_LOCK_DURATION_MS: '2000',
      TETRALOOP_BACKOFF_BASE_MS: '500',
    },
  });
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill('SIGKILL')));
  await stack?.close();
  await model?.close();
  await loopback?.close();
});

/** A tool worker process serving the fixture module on `queues`. */
async function startToolWorker(queues: string): Promise<Spawned> {
  const worker = spawnTetraloop(['worker', '--pool', 'tool', '--tools', MODULE, '--queues', queues], {
    ...stack.env,
    TOOL_SERVER_URL: loopback.url,
  });
  workers.push(worker);
  await stderrMatches(worker, /worker ready: pools tool/);
  return worker;
}

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const lookup = (id = 'customer', email = 'ada@example.com') => ({
  id,
  kind: 'tool',
  tool: 'crm.lookup',
  args: { email },
});

const outputOf = (doc: RunDocument, node: string): unknown =>
  (doc.nodes[node] as { output?: unknown } | undefined)?.output;

async function runGraph(graph: unknown, timeoutMs = 30_000): Promise<RunDocument> {
  const posted = await postRun(stack.url, { graph });
  expect(posted.status, JSON.stringify(posted.body)).toBe(202);
  return waitFor(stack.url, posted.body.runId as string, timeoutMs);
}

describe('custom tools served by a worker process', () => {
  beforeAll(async () => {
    await startToolWorker('crm,default');
    expect((await call('PUT', '/v1/secrets/CRM_TOKEN', { value: TOKEN, tools: ['crm.lookup'] })).status).toBe(
      204,
    );
  }, 60_000);

  it('runs a fixed graph calling them, with the secret, progress and version on each attempt', async () => {
    const graph = {
      nodes: [
        lookup(),
        { id: 'loud', kind: 'tool', tool: 'text.shout', args: { text: 'hello {{customer.output.name}}' } },
      ],
      edges: [['customer', 'loud']],
    };
    const doc = await runGraph(graph);
    expect(doc.status).toBe('succeeded');
    expect(outputOf(doc, 'customer')).toEqual({ id: 'c-1', name: 'Ada Lovelace', plan: 'pro' });
    expect(outputOf(doc, 'loud')).toMatchObject({ text: 'HELLO ADA LOVELACE' });
    const attempt = doc.nodes.customer?.attempts.at(-1);
    expect(attempt).toMatchObject({ tool: 'crm.lookup', toolVersion: '3' });
    expect(attempt?.schemaHash).toMatch(/^[0-9a-f]{12}$/);
    const [hit] = loopback.hitsOf('/crm/customers');
    expect(hit?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(hit?.headers['idempotency-key']).toMatch(/.+/);
    // The secret's value reaches no event and no document.
    const events = await readEvents(stack.url, doc.runId);
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    expect(JSON.stringify(doc)).not.toContain(TOKEN);
    const progress = events.find((e) => e.data.type === 'node.progress');
    expect(progress?.data).toMatchObject({
      nodeId: 'customer',
      data: { fraction: 0.5, message: 'customer found' },
    });
  });
});
