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
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { connectRedis, whenReady } from '@tetraloop/core/runtime';
import { nodeJobId } from '@tetraloop/core/queues';
import { toolCatalogKeys } from '@tetraloop/core/state';
import { spawnTetraloop, spawnToolWorker, stderrMatches, type Spawned } from './support/processes.js';
import {
  isPlannerCall,
  scriptedModelEnv,
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import { metricValue } from './support/inspect.js';
import { postRun, putToolSecret, readEvents, startStack, waitFor, type Stack } from './support/stack.js';

const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));
const MODULE = fileURLToPath(new URL('./fixtures/tools/tools.ts', import.meta.url));
/** `crm.lookup` version 4, whose output schema differs. */
const MODULE_V4 = fileURLToPath(new URL('./fixtures/tools/tools-v4.ts', import.meta.url));
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
/** The process serving the `crm` and `default` queues with version 3 of `crm.lookup`. */
let crm: Spawned;
let model: ModelServer;
let planner: (request: ChatRequest) => ScriptedReply = () => ({ content: '{}' });
const workers: Spawned[] = [];

/** Answers the other model calls (an agent's turns). */
let agent: (request: ChatRequest) => ScriptedReply = () => ({ content: 'ok' });

beforeAll(async () => {
  loopback = new Loopback();
  await loopback.start();
  model = await startModelServer({
    script: (request) => (isPlannerCall(request) ? planner(request) : agent(request)),
  });
  stack = await startStack({
    pools: ['plan', 'tool'],
    env: {
      ...scriptedModelEnv(model),
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
async function startToolWorker(queues: string, module = MODULE): Promise<Spawned> {
  const worker = spawnToolWorker(module, queues, { ...stack.env, TOOL_SERVER_URL: loopback.url });
  workers.push(worker);
  await worker.ready;
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

describe('loading tool modules', () => {
  it('stops a worker with one line naming the module and the field', async () => {
    const start = (...modules: string[]) =>
      spawnTetraloop(['worker', '--pool', 'tool', ...modules.flatMap((m) => ['--tools', m])], stack.env);
    const badName = start(fileURLToPath(new URL('./fixtures/tools/bad-name.ts', import.meta.url)));
    const duplicate = start(MODULE, MODULE_V4);
    const missing = start('./no-such-tools.js');
    const empty = start(fileURLToPath(new URL('./fixtures/tools/no-tools.ts', import.meta.url)));
    const ends = await Promise.all(
      [badName, duplicate, missing, empty].map(async (p) => ({ ...(await p.exited), err: p.stderr() })),
    );
    for (const end of ends) expect(end.code, end.err).toBe(2);
    expect(ends[0]!.err).toMatch(
      /^tool module .*bad-name\.ts: tool "http": name is taken by a built-in tool/m,
    );
    expect(ends[1]!.err).toMatch(
      /^tool module .*tools-v4\.ts: tool "crm\.lookup" is also defined by .*tools\.ts$/m,
    );
    expect(ends[2]!.err).toMatch(/^tool module \.\/no-such-tools\.js: does not load/m);
    expect(ends[3]!.err).toMatch(
      /^tool module .*no-tools\.ts: exports no tool \(define them with defineTool\)$/m,
    );
  });
});

describe('custom tools served by a worker process', () => {
  beforeAll(async () => {
    crm = await startToolWorker('crm,default');
    expect(await putToolSecret(stack.url, 'CRM_TOKEN', TOKEN, ['crm.lookup'])).toBe(204);
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

  it('bounds node.progress per node across its attempts: a retry does not start the count over', async () => {
    const doc = await runGraph({
      nodes: [{ id: 'c', kind: 'tool', tool: 'test.chatty', args: { reports: 70 } }],
    });
    expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
    expect(doc.nodes.c?.attempts).toHaveLength(2);
    const progress = (await readEvents(stack.url, doc.runId)).filter((e) => e.data.type === 'node.progress');
    // MAX_PROGRESS_EVENTS: 70 of the first attempt, the 30 left of the second's 70.
    expect(progress).toHaveLength(100);
    const ofAttempt = (n: number) =>
      progress.filter((e) => (e.data.data as { attempt: number }).attempt === n).length;
    expect([ofAttempt(1), ofAttempt(2)]).toEqual([70, 30]);
  });

  it('rejects a graph at submit: args at the field, an unknown tool, a field its output lacks', async () => {
    const badEmail = await postRun(stack.url, { graph: { nodes: [lookup('c', 'not-an-email')] } });
    expect(badEmail.status).toBe(400);
    expect(JSON.stringify(badEmail.body)).toContain('nodes.0.args.email');
    const unknown = await postRun(stack.url, {
      graph: { nodes: [{ id: 'x', kind: 'tool', tool: 'crm.nope', args: {} }] },
    });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body)).toMatch(/unknown tool \\"crm.nope\\"; known tools: .*crm.lookup/);
    const typo = await postRun(stack.url, {
      graph: {
        nodes: [
          lookup(),
          { id: 'loud', kind: 'tool', tool: 'text.shout', args: { text: '{{customer.output.nmae}}' } },
        ],
        edges: [['customer', 'loud']],
      },
    });
    expect(typo.status).toBe(400);
    expect(JSON.stringify(typo.body)).toContain('has no output.nmae in its output schema');
  });

  it('classifies failures: output outside its schema, a plain Error, a network failure, Retry-After', async () => {
    const misbehave = (how: string) => ({ id: 'm', kind: 'tool', tool: 'test.misbehave', args: { how } });
    const badOutput = await runGraph({ nodes: [misbehave('bad-output')] });
    expect(badOutput.nodes.m).toMatchObject({ status: 'failed', error: { code: 'validation' } });
    const thrown = await runGraph({ nodes: [misbehave('throw')] });
    expect(thrown.nodes.m).toMatchObject({
      status: 'failed',
      error: { code: 'internal', message: 'a plain bug' },
    });
    // `internal` is not retried by default.
    expect(thrown.nodes.m?.attempts).toHaveLength(1);
    const network = await runGraph({ nodes: [misbehave('network')] });
    expect(network.nodes.m).toMatchObject({ status: 'failed', error: { code: 'network' } });
    expect(network.nodes.m?.attempts).toHaveLength(3);
    // The CRM is busy once: the tool's ToolError('rate_limited', …, {retryAfterMs: 600}) is honoured.
    loopback.crmStatuses = [429];
    const busy = await runGraph({ nodes: [lookup()] });
    expect(busy.status).toBe('succeeded');
    const [first, second] = busy.nodes.customer?.attempts ?? [];
    expect(first).toMatchObject({ error: { code: 'rate_limited', retryAfterMs: 600 } });
    expect(first?.retryDelayMs).toBeGreaterThanOrEqual(600);
    expect(second?.error).toBeUndefined();
  });

  it('stops a custom tool at its own time limit as `timeout`, and on a run cancel as `aborted`', async () => {
    const stoppedWhy = (tag: string) =>
      loopback
        .hitsOf('/crm/stopped')
        .find((h) => h.query.get('tag') === tag)
        ?.query.get('reason');
    const sleepy = (tag: string) => ({ id: 's', kind: 'tool', tool: 'test.sleepy', args: { tag } });
    const timedOut = await runGraph({ nodes: [sleepy('limit')] });
    expect(timedOut.nodes.s).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
    expect(timedOut.nodes.s?.attempts).toHaveLength(1);
    await expect.poll(() => stoppedWhy('limit'), { timeout: 10_000 }).toBe('timed out after 800 ms');
    // The node's own time limit wins over the tool's; the run is cancelled while the call waits.
    const posted = await postRun(stack.url, {
      graph: { nodes: [{ ...sleepy('cancel'), timeoutMs: 60_000 }] },
    });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await expect
      .poll(() => loopback.hitsOf('/crm/sleeping').some((h) => h.query.get('tag') === 'cancel'), {
        timeout: 20_000,
      })
      .toBe(true);
    expect((await call('POST', `/v1/runs/${runId}/cancel`)).status).toBeLessThan(300);
    const cancelled = await waitFor(stack.url, runId, 30_000);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.nodes.s).toMatchObject({ status: 'cancelled', error: { code: 'aborted' } });
    await expect.poll(() => stoppedWhy('cancel'), { timeout: 10_000 }).toBe('run aborted');
  });

  it('gives ctx.secret a secret the tool declares and the secret allows; refuses the others', async () => {
    const undeclared = await runGraph({
      nodes: [{ id: 'm', kind: 'tool', tool: 'test.misbehave', args: { how: 'secret' } }],
    });
    expect(undeclared.nodes.m).toMatchObject({
      status: 'failed',
      error: { code: 'validation', reason: 'secret_not_allowed' },
    });
    expect((await call('PUT', '/v1/secrets/CRM_TOKEN', { tools: ['another.tool'] })).status).toBe(204);
    try {
      const before = loopback.hitsOf('/crm/customers').length;
      const refused = await runGraph({ nodes: [lookup()] });
      expect(refused.nodes.customer).toMatchObject({
        status: 'failed',
        error: { code: 'validation', reason: 'secret_not_allowed' },
      });
      expect(JSON.stringify(refused.nodes.customer)).toContain('may not be given to tool \\"crm.lookup\\"');
      expect(loopback.hitsOf('/crm/customers')).toHaveLength(before);
    } finally {
      await call('PUT', '/v1/secrets/CRM_TOKEN', { tools: ['crm.lookup'] });
    }
  });

  it('lists the tools with their kind, queue, versions and live workers', async () => {
    const { status, body } = await call('GET', '/v1/tools');
    expect(status).toBe(200);
    const tools = body.tools as { name: string; kind: string }[];
    expect(tools.find((t) => t.name === 'http')).toMatchObject({ kind: 'builtin' });
    expect(tools.find((t) => t.name === 'crm.lookup')).toMatchObject({
      kind: 'custom',
      queue: 'crm',
      description: 'Find a customer by e-mail',
      versions: [{ version: '3', workers: 1 }],
      workers: 1,
    });
    expect(tools.find((t) => t.name === 'text.shout')).toMatchObject({ kind: 'custom', queue: 'default' });
    // The catalog's keys are bounded: each expires a catalog TTL (24 h) after the last heartbeat.
    const redis = connectRedis(stack.env.REDIS_URL!, 'client', 'custom-tools-test');
    try {
      await whenReady(redis);
      const keys = toolCatalogKeys(stack.prefix);
      for (const key of [keys.tools, keys.workers, keys.beats]) {
        const ttl = await redis.pttl(key);
        expect(ttl, key).toBeGreaterThan(23 * 3_600_000);
        expect(ttl, key).toBeLessThanOrEqual(24 * 3_600_000);
      }
    } finally {
      redis.disconnect();
    }
  });

  it('plans a task with the custom tools, which the planner is told of', async () => {
    planner = () => ({
      content: JSON.stringify({
        nodes: [
          { id: 'who', kind: 'tool', tool: 'crm.lookup', args: { email: 'ada@example.com' } },
          { id: 'say', kind: 'tool', tool: 'text.shout', args: { text: 'hi {{who.output.name}}' } },
        ],
        edges: [['who', 'say']],
      }),
    });
    const before = model.requests.length;
    const posted = await postRun(stack.url, { task: 'greet the customer ada@example.com loudly' });
    expect(posted.status).toBe(202);
    const doc = await waitFor(stack.url, posted.body.runId as string, 30_000);
    expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
    expect(outputOf(doc, 'say')).toMatchObject({ text: 'HI ADA LOVELACE' });
    const asked = JSON.stringify(model.requests.slice(before).find(isPlannerCall));
    expect(asked).toContain('crm.lookup');
    expect(asked).toContain('Find a customer by e-mail');
  });
});

describe('tool queues and worker processes', () => {
  const render = (id: string, scene: string) => ({ id, kind: 'tool', tool: 'gpu.render', args: { scene } });
  const gauge = (): Promise<number> =>
    metricValue(stack.url, 'tetraloop_tool_workers{tool="gpu.render",queue="gpu"}');
  let gpu: Spawned;

  it('runs each node only on a process serving its queue', async () => {
    gpu = await startToolWorker('gpu');
    const doc = await runGraph({ nodes: [lookup(), render('img', 'a')], edges: [['customer', 'img']] });
    expect(doc.status).toBe('succeeded');
    const crmPid = loopback.hitsOf('/crm/customers').at(-1)?.headers['x-worker-pid'];
    const gpuPid = (outputOf(doc, 'img') as { pid: number }).pid;
    expect(gpuPid).toBe(gpu.child.pid);
    expect(Number(crmPid)).not.toBe(gpu.child.pid);
    expect(Number(crmPid)).not.toBe(process.pid);
    expect(await gauge()).toBe(1);
  });

  it('keeps a node of a tool without a live worker queued until one starts', async () => {
    await gpu.kill('SIGTERM');
    await expect.poll(gauge, { timeout: 10_000 }).toBe(0);
    // A tool never seen is unknown; one seen within the catalog TTL is accepted and waits.
    const never = await postRun(stack.url, {
      graph: { nodes: [{ id: 'n', kind: 'tool', tool: 'gpu.never', args: {} }] },
    });
    expect(never.status).toBe(400);
    const posted = await postRun(stack.url, { graph: { nodes: [render('img', 'b')] } });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await expect
      .poll(
        async () =>
          ((await call('GET', `/v1/runs/${runId}`)).body.nodes as Record<string, { status: string }>).img
            ?.status,
        { timeout: 10_000 },
      )
      .toBe('queued');
    expect(((await call('GET', `/v1/runs/${runId}`)).body as { status: string }).status).toBe('running');
    gpu = await startToolWorker('gpu');
    const doc = await waitFor(stack.url, runId, 30_000);
    expect(doc.status).toBe('succeeded');
    expect((outputOf(doc, 'img') as { pid: number }).pid).toBe(gpu.child.pid);
    await expect.poll(gauge, { timeout: 10_000 }).toBe(1);
  });

  it('finishes a call cut by SIGKILL on a second worker, with the same idempotency key; done nodes stay done', async () => {
    loopback.holdRenders = true;
    const before = loopback.hitsOf('/gpu/render').length;
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          { id: 'first', kind: 'tool', tool: 'text.shout', args: { text: 'once' } },
          render('img', 'c'),
        ],
        edges: [['first', 'img']],
      },
    });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await expect.poll(() => loopback.hitsOf('/gpu/render').length, { timeout: 20_000 }).toBe(before + 1);
    await gpu.kill('SIGKILL');
    gpu = await startToolWorker('gpu');
    await expect.poll(() => loopback.hitsOf('/gpu/render').length, { timeout: 30_000 }).toBe(before + 2);
    const [cut, again] = loopback.hitsOf('/gpu/render').slice(before);
    expect(again?.headers['idempotency-key']).toBe(cut?.headers['idempotency-key']);
    expect(Number(again?.headers['x-worker-pid'])).toBe(gpu.child.pid);
    loopback.releaseRenders();
    const doc = await waitFor(stack.url, runId, 30_000);
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.first?.attempts).toHaveLength(1);
    expect((outputOf(doc, 'img') as { pid: number }).pid).toBe(gpu.child.pid);
  }, 90_000);

  it('aborts a custom tool call on SIGTERM and hands its node back: a second worker finishes the same attempt', async () => {
    loopback.holdRenders = true;
    const before = loopback.hitsOf('/gpu/render').length;
    const posted = await postRun(stack.url, { graph: { nodes: [render('img', 'term')] } });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await expect.poll(() => loopback.hitsOf('/gpu/render').length, { timeout: 20_000 }).toBe(before + 1);
    const stopping = gpu;
    await stopping.kill('SIGTERM');
    expect((await stopping.exited).code).toBe(0);
    // The tool heard the abort, and why, and stopped; the node went back to its queue at once.
    const [heard] = loopback.hitsOf('/gpu/aborted').filter((h) => h.query.get('scene') === 'term');
    expect(heard?.query.get('reason')).toBe('worker shutting down');
    // Handed back, not stalled: no worker serves `gpu` now, and the job is out of the active set,
    // marked to re-enter its attempt.
    const redis = connectRedis(stack.env.REDIS_URL!, 'client', 'custom-tools-test');
    const gpuQueue = new Queue('tool.gpu', { connection: redis, prefix: stack.prefix });
    try {
      const job = await gpuQueue.getJob(nodeJobId(runId, 'img'));
      expect(['delayed', 'waiting']).toContain(await job?.getState());
      expect(job?.data).toMatchObject({ resumes: 1 });
    } finally {
      await gpuQueue.close();
      redis.disconnect();
    }
    gpu = await startToolWorker('gpu');
    await expect.poll(() => loopback.hitsOf('/gpu/render').length, { timeout: 30_000 }).toBe(before + 2);
    const [cut, again] = loopback.hitsOf('/gpu/render').slice(before);
    expect(again?.headers['idempotency-key']).toBe(cut?.headers['idempotency-key']);
    loopback.releaseRenders();
    const doc = await waitFor(stack.url, runId, 30_000);
    expect(doc.status).toBe('succeeded');
    expect((outputOf(doc, 'img') as { pid: number }).pid).toBe(gpu.child.pid);
    // Not failed, not retried: the one attempt, taken up and finished by the second worker.
    expect(doc.nodes.img?.attempts).toHaveLength(1);
    expect(doc.nodes.img?.attempts[0]).not.toHaveProperty('error');
  }, 90_000);

  it('fails, never passes silently, an output of another version that the run was not checked against', async () => {
    // Version 3 stops; the run is checked against it and waits; version 4 (another output) serves it.
    await crm.kill('SIGTERM');
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          lookup(),
          { id: 'loud', kind: 'tool', tool: 'json', args: { value: { $ref: 'customer.output.name' } } },
        ],
        edges: [['customer', 'loud']],
      },
    });
    expect(posted.status).toBe(202);
    await startToolWorker('crm', MODULE_V4);
    const doc = await waitFor(stack.url, posted.body.runId as string, 30_000);
    expect(doc.nodes.customer).toMatchObject({
      status: 'failed',
      error: { code: 'validation', message: expect.stringContaining('crm.lookup version 4') },
    });
    expect(doc.nodes.customer?.attempts.at(-1)).toMatchObject({ toolVersion: '4' });
  });
});

describe('a worker program of the team’s own', () => {
  it('serves the tools it gives startWorker of @tetraloop/sdk and those of TETRALOOP_TOOL_MODULES', async () => {
    const program = spawnTetraloop(
      [],
      {
        ...stack.env,
        TETRALOOP_TOOL_MODULES: fileURLToPath(new URL('./fixtures/tools/misc-tools.ts', import.meta.url)),
      },
      {
        command: [
          TSX,
          '--conditions=tetraloop-source',
          fileURLToPath(new URL('./fixtures/tools/sdk-worker.ts', import.meta.url)),
        ],
      },
    );
    workers.push(program);
    try {
      await stderrMatches(program, /sdk worker ready/);
      const doc = await runGraph({
        nodes: [
          { id: 'echo', kind: 'tool', tool: 'sdk.echo', args: { text: 'hello' } },
          { id: 'back', kind: 'tool', tool: 'misc.reverse', args: { text: '{{echo.output.text}}' } },
        ],
        edges: [['echo', 'back']],
      });
      expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
      // Both ran in the program (tsx runs it in a child process of its own), not in this one.
      const echo = outputOf(doc, 'echo') as { text: string; pid: number };
      expect(echo.text).toBe('hello');
      expect(echo.pid).not.toBe(process.pid);
      expect(outputOf(doc, 'back')).toEqual({ text: 'olleh', pid: echo.pid });
    } finally {
      await program.kill('SIGTERM');
    }
  }, 90_000);
});

describe('an agent calling a custom tool', () => {
  it('calls it in the process that runs the agent when it loaded the tool’s module; with no worker serving it, fails at once', async () => {
    // This stack has no tool pool of its own: the agent node runs on the worker process below.
    const own = await startStack({
      pools: ['plan'],
      env: { ...Object.fromEntries(Object.entries(stack.env).filter(([k]) => k !== 'TETRALOOP_PREFIX')) },
    });
    // An agent loop that may call `crm.lookup`, posted once with a worker serving it and once without.
    const askForAdasPlan = {
      nodes: [
        {
          id: 'ask',
          kind: 'loop',
          maxIterations: 3,
          body: { agent: { prompt: 'Which plan is Ada on?', tools: ['crm.lookup'] } },
        },
      ],
    };
    const worker = spawnToolWorker(MODULE, 'crm,default', { ...own.env, TOOL_SERVER_URL: loopback.url });
    workers.push(worker);
    try {
      await worker.ready;
      expect(await putToolSecret(own.url, 'CRM_TOKEN', TOKEN, ['crm.lookup'])).toBe(204);
      const before = model.requests.length;
      const hits = loopback.hitsOf('/crm/customers').length;
      agent = (request) =>
        request.messages.some((m) => m.role === 'tool')
          ? { content: 'Ada is on the pro plan.' }
          : { content: '', toolCalls: [{ name: 'crm__lookup', arguments: { email: 'ada@example.com' } }] };
      const posted = await postRun(own.url, { graph: askForAdasPlan });
      expect(posted.status, JSON.stringify(posted.body)).toBe(202);
      const doc = await waitFor(own.url, posted.body.runId as string, 30_000);
      expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
      const [hit] = loopback.hitsOf('/crm/customers').slice(hits);
      expect(Number(hit?.headers['x-worker-pid'])).toBe(worker.child.pid);
      expect(hit?.headers.authorization).toBe(`Bearer ${TOKEN}`);
      // The agent was shown the tool: its function name, description and input schema.
      const shown = JSON.stringify(model.requests.slice(before)[0]?.tools);
      expect(shown).toContain('crm__lookup');
      expect(shown).toContain('Find a customer by e-mail');

      // The agent's process without the tool's module, and no worker serving its queue: the node
      // fails at once, naming the queue; the model is not told.
      await worker.kill('SIGTERM');
      const plain = spawnTetraloop(['worker', '--pool', 'tool'], own.env);
      workers.push(plain);
      await stderrMatches(plain, /worker ready: pools tool/);
      const turns = model.requests.length;
      const missing = await postRun(own.url, { graph: askForAdasPlan });
      expect(missing.status, JSON.stringify(missing.body)).toBe(202);
      const failed = await waitFor(own.url, missing.body.runId as string, 30_000);
      expect(failed.status).toBe('failed');
      expect(failed.nodes.ask).toMatchObject({
        status: 'failed',
        error: {
          code: 'internal',
          reason: 'tool_unserved',
          message: expect.stringContaining('no live worker serves its queue "crm"'),
        },
      });
      // One model turn asked for the tool; the failure did not go back to the model.
      expect(model.requests.length - turns).toBe(1);
      await plain.kill('SIGTERM');
    } finally {
      agent = () => ({ content: 'ok' });
      await worker.kill('SIGTERM');
      await own.close();
    }
  }, 90_000);
});
