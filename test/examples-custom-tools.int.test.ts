/**
 * examples/custom-tools works as its README says: its loopback CRM and its graph script run with
 * tsx as a newcomer runs them, its tools on a worker process started with `--tools`, beside a
 * stack whose own tool pool has none of their code (as `npm start`'s); its task is planned into
 * calls of the tools (the planner scripted).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { spawnTetraloop, stderrMatches, type Spawned } from './support/processes.js';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { postRun, startStack, waitFor, type Stack } from './support/stack.js';
import { welcomeGraph } from '../examples/custom-tools/graph.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));
const EXAMPLE = 'examples/custom-tools';
const TOKEN = `crm-${randomBytes(8).toString('hex')}`;
/** The packages as the example's commands load them: their TypeScript sources. */
const SOURCES = '--conditions=tetraloop-source';

/** `npx tsx <args>` from the repository's root. */
function tsx(args: string[], env: Record<string, string>): Spawned & { stdout(): string } {
  const child = spawn(process.execPath, [TSX, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** Resolves when the process's stdout matches `pattern`; rejects if it exits first. */
function stdoutMatches(p: ReturnType<typeof tsx>, pattern: RegExp): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const m = pattern.exec(p.stdout());
      if (m) resolve(m);
    };
    p.child.stdout?.on('data', check);
    void p.exited.then(() => reject(new Error(`process exited before printing ${pattern}:\n${p.stderr()}`)));
    check();
  });
}

const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

let stack: Stack;
let model: ModelServer;
let crm: ReturnType<typeof tsx>;
let crmUrl: string;
let worker: Spawned;

beforeAll(async () => {
  crm = tsx([`${EXAMPLE}/crm-server.ts`], { CRM_PORT: '0', CRM_TOKEN: TOKEN });
  model = await startModelServer({
    script: (request) =>
      isPlannerCall(request)
        ? {
            content: JSON.stringify({
              nodes: [
                { id: 'who', kind: 'tool', tool: 'crm.lookup', args: { email: 'ada@example.com' } },
                {
                  id: 'note',
                  kind: 'llm',
                  prompt: 'Welcome {{who.output.name}} to the {{who.output.plan}} plan in two sentences.',
                },
                { id: 'slug', kind: 'tool', tool: 'text.slug', args: { text: '{{who.output.name}}' } },
              ],
              edges: [
                ['who', 'note'],
                ['who', 'slug'],
              ],
            }),
          }
        : { content: 'Welcome, Ada! Your pro plan is ready.' },
  });
  stack = await startStack({
    pools: ['plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL: 'scripted',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_SECRET_KEY: randomBytes(32).toString('base64'),
      TETRALOOP_TOOL_HEARTBEAT_MS: '500',
    },
  });
  crmUrl = (await stdoutMatches(crm, /CRM listening on (http:\S+)/))[1]!;
  // The README's worker command, relative module path and all.
  worker = spawnTetraloop(
    ['worker', '--pool', 'tool', '--tools', `./${EXAMPLE}/tools.ts`, '--queues', 'crm,default'],
    { ...stack.env, CRM_URL: crmUrl, NODE_OPTIONS: SOURCES },
    { cwd: ROOT },
  );
  await stderrMatches(worker, /worker ready: pools tool/);
  const put = await fetch(`${stack.url}/v1/secrets/CRM_TOKEN`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ value: TOKEN, tools: ['crm.lookup'] }),
  });
  expect(put.status).toBe(204);
}, 60_000);

afterAll(async () => {
  await worker?.kill('SIGKILL');
  await crm?.kill();
  await stack?.close();
  await model?.close();
});

const outputOf = (doc: RunDocument, node: string): unknown =>
  (doc.nodes[node] as { output?: unknown } | undefined)?.output;

describe('examples/custom-tools', () => {
  it("graph.ts's builder writes the graph with its edges inferred from the references", () => {
    const built = welcomeGraph();
    expect(built.nodes.map((n) => [n.id, 'tool' in n ? n.tool : n.kind])).toEqual([
      ['customer', 'crm.lookup'],
      ['page', 'text.slug'],
      ['card', 'json'],
    ]);
    expect(built.edges).toEqual([
      ['customer', 'page'],
      ['customer', 'card'],
      ['page', 'card'],
    ]);
  });

  it('graph.ts builds its graph, submits it and prints each node: the CRM was called with the secret', async () => {
    const script = tsx([SOURCES, `${EXAMPLE}/graph.ts`, 'grace@example.com'], {
      TETRALOOP_API_URL: stack.url,
    });
    const { code } = await script.exited;
    expect(code, script.stdout() + script.stderr()).toBe(0);
    expect(script.stdout()).toContain('customer: succeeded {"id":"c-2","name":"Grace Hopper"');
    expect(script.stdout()).toContain(
      'card: succeeded {"name":"Grace Hopper","plan":"free","url":"https://example.org/welcome-grace-hopper"}',
    );
    // The CRM answers only a request with its token; the script's output does not carry it.
    expect(crm.stdout()).toContain('GET /customers?email=grace%40example.com');
    expect(script.stdout()).not.toContain(TOKEN);
  });

  it('task.json is planned into calls of the tools, which the planner is told of', async () => {
    const task = JSON.parse(readFileSync(`${ROOT}/${EXAMPLE}/task.json`, 'utf8')) as unknown;
    const before = model.requests.length;
    const posted = await postRun(stack.url, task);
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const doc = await waitFor(stack.url, posted.body.runId as string, 30_000);
    expect(doc.status, JSON.stringify(doc.nodes)).toBe('succeeded');
    expect(outputOf(doc, 'who')).toMatchObject({ name: 'Ada Lovelace', plan: 'pro' });
    expect(outputOf(doc, 'slug')).toEqual({ slug: 'ada-lovelace' });
    expect(doc.nodes.who?.attempts.at(-1)).toMatchObject({ tool: 'crm.lookup', toolVersion: '1' });
    const asked = JSON.stringify(model.requests.slice(before).find(isPlannerCall));
    expect(asked).toContain('crm.lookup');
    expect(asked).toContain('text.slug');
  });
});
