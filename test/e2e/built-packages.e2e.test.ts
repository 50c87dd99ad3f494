/**
 * The built packages (`npm run build`) as a team's own project uses them: plain Node, no tsx, no
 * `tetraloop-source` condition. The build is staged in a directory of its own
 * (`scripts/build.mjs --out-dir`: each package's dist/, manifest and files, no sources), so the
 * checkout's packages are left as they are; there a project of the team's imports @tetraloop/sdk
 * and @tetraloop/client, type-checks against their declarations, and serves a tool from the
 * built `tetraloop worker` to runs submitted to the built `tetraloop api`, which serves the console.
 * The packages the workers load only when first used (undici for `http` nodes, the `openai` SDK,
 * `yaml` for skills) are used from the bundle too: a task run is planned through the scripted
 * model into an `http` node, and a loop-mode run's prompt holds a skill of the workspace.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { planReply } from '../support/planner-stack.js';
import {
  isPlannerCall,
  scriptedModelEnv,
  startModelServer,
  type ModelServer,
} from '../support/model-server.js';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { testEnv } from '../support/stack.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
// Inside the checkout, so the staged packages' third-party dependencies resolve from its node_modules.
const STAGE = join(ROOT, 'test-output', `built-${randomUUID().slice(0, 8)}`);
const PROJECT = join(STAGE, 'project');
const BIN = join(STAGE, 'apps/cli/bin/tetraloop.mjs');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** The team's tool, in JavaScript, written against the built @tetraloop/sdk. */
const TOOLS = `import { z } from 'zod';
import { defineTool, ToolError } from '@tetraloop/sdk';

export const shout = defineTool({
  name: 'acme.shout',
  description: 'The text in capitals',
  input: z.object({ text: z.string() }),
  output: z.object({ text: z.string() }),
  async run(input) {
    return { text: input.text.toUpperCase() };
  },
});

// Thrown from the project's own copy of the SDK, classified by the bundled worker's.
export const locked = defineTool({
  name: 'acme.locked',
  description: 'Always refused',
  input: z.object({}),
  output: z.object({}),
  async run() {
    throw new ToolError('auth', 'the vault is locked');
  },
});
`;

/** Submits a run calling the tool through the built @tetraloop/client and prints what it gave. */
const SUBMIT = `import { TetraloopClient } from '@tetraloop/client';

const client = new TetraloopClient({ baseUrl: process.env.API_URL });
const { runId } = await client.submit({
  graph: { nodes: [{ id: 'shout', kind: 'tool', tool: 'acme.shout', args: { text: 'built' } }], edges: [] },
});
const doc = await client.wait(runId, 30_000);
const refused = await client.submit({
  graph: { nodes: [{ id: 'open', kind: 'tool', tool: 'acme.locked', args: {} }], edges: [] },
});
const refusedDoc = await client.wait(refused.runId, 30_000);
console.log(
  JSON.stringify({
    status: doc.status,
    output: doc.nodes.shout?.output,
    refused: refusedDoc.nodes.open?.error,
    sdk: import.meta.resolve('@tetraloop/sdk'),
    client: import.meta.resolve('@tetraloop/client'),
  }),
);
`;

/** The same in TypeScript, checked against the packages' declarations: wrong uses do not compile. */
const TYPED = `import { z } from 'zod';
import { defineTool, type ToolDefinition } from '@tetraloop/sdk';
import { TetraloopClient, type RunDocument } from '@tetraloop/client';

const input = z.object({ text: z.string() });
const output = z.object({ text: z.string() });
const definition: ToolDefinition<z.infer<typeof input>, z.infer<typeof output>> = {
  name: 'acme.shout',
  description: 'The text in capitals',
  input,
  output,
  run: async ({ text }) => ({ text: text.toUpperCase() }),
};
export const shout = defineTool(definition);

defineTool<{ text: string }, { length: number }>({
  name: 'acme.count',
  description: 'The length of the text',
  input,
  output: z.object({ length: z.number() }),
  // @ts-expect-error: run answers what the output schema says
  run: async ({ text }) => ({ length: text }),
});

export async function statusOf(runId: string): Promise<RunDocument['status']> {
  const client = new TetraloopClient({ baseUrl: 'http://127.0.0.1:3000' });
  // @ts-expect-error: a run id is a string
  await client.get(42);
  return (await client.get(runId)).status;
}
`;

const processes: Spawned[] = [];
let model: ModelServer;
let tools: ToolServer;
const WORKSPACE = join(STAGE, 'workspace');

/** A process of the built `tetraloop` command (the stage holds no sources: nothing else can run). */
function start(args: string[], env: Record<string, string>): Spawned {
  const spawned = spawnTetraloop(args, env, { command: [BIN] });
  processes.push(spawned);
  return spawned;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Submits `body` to the API on `port` with plain `fetch` and waits for the run's document. */
async function runThrough(
  port: number,
  body: unknown,
): Promise<{ status: string; nodes: Record<string, { status: string; output?: { status?: number } }> }> {
  const runs = `http://127.0.0.1:${port}/v1/runs`;
  const accepted = await fetch(runs, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(accepted.status).toBe(202);
  const { runId } = (await accepted.json()) as { runId: string };
  return (await (await fetch(`${runs}/${runId}/wait?timeoutMs=30000`)).json()) as Awaited<
    ReturnType<typeof runThrough>
  >;
}

beforeAll(async () => {
  await run(process.execPath, ['scripts/build.mjs', '--out-dir', STAGE], { cwd: ROOT });
  tools = await startToolServer();
  model = await startModelServer({
    script: (request) =>
      isPlannerCall(request)
        ? planReply({
            nodes: [
              { id: 'fetch', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=fetch&ms=1` } },
            ],
            edges: [],
          })
        : { content: 'done' },
  });
  mkdirSync(join(WORKSPACE, 'main', 'skills'), { recursive: true });
  writeFileSync(
    join(WORKSPACE, 'main', 'skills', 'fetching.md'),
    '---\nname: fetching\ndescription: How to fetch\ntools: [http]\n---\nFETCH WITH THE HTTP TOOL\n',
  );
  mkdirSync(PROJECT, { recursive: true });
  writeFileSync(join(PROJECT, 'package.json'), JSON.stringify({ name: 'acme-tools', type: 'module' }));
  writeFileSync(join(PROJECT, 'tools.mjs'), TOOLS);
  writeFileSync(join(PROJECT, 'submit.mjs'), SUBMIT);
  writeFileSync(join(PROJECT, 'typed.ts'), TYPED);
  writeFileSync(
    join(PROJECT, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2023',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
      },
      files: ['typed.ts'],
    }),
  );
}, 300_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.kill()));
  await model?.close();
  await tools?.close();
  rmSync(STAGE, { recursive: true, force: true });
});

it('type-checks a TypeScript project against the declarations of @tetraloop/sdk and @tetraloop/client', async () => {
  const checked = await run(process.execPath, [TSC, '-p', PROJECT]).then(
    () => '',
    (err: Error & { stdout?: string }) => err.stdout || err.message,
  );
  expect(checked).toBe('');
}, 120_000);

it('runs `tetraloop --help` from the built JavaScript', async () => {
  const answer = await run(process.execPath, [BIN, '--help'], { env: { PATH: process.env.PATH ?? '' } }).then(
    () => ({ code: 0, stderr: '' }),
    (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
  );
  expect(answer.code).toBe(2);
  expect(answer.stderr).toMatch(/^usage: tetraloop <command>/);
});

it("serves a plain Node project's tool from the built worker to runs its client submits to the built API", async () => {
  // The built command runs its bundle (not the per-module dist/, which only tracing runs).
  expect(existsSync(join(STAGE, 'apps/cli/dist/bundle/main.js'))).toBe(true);
  const port = await freePort();
  const env = testEnv({ PORT: `${port}`, ...scriptedModelEnv(model), TETRALOOP_WORKSPACE_DIR: WORKSPACE });
  const api = start(['api'], env);
  const worker = start(['worker', '--pool', 'all', '--tools', join(PROJECT, 'tools.mjs')], env);
  await stderrMatches(worker, /worker ready/);
  for (;;) {
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (api.child.exitCode !== null) throw new Error(`the API ended:\n${api.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const { stdout } = await run(process.execPath, [join(PROJECT, 'submit.mjs')], {
    env: { PATH: process.env.PATH ?? '', API_URL: `http://127.0.0.1:${port}` },
  });
  const result = JSON.parse(stdout) as Record<string, unknown>;
  expect(result).toEqual({
    status: 'succeeded',
    output: { text: 'BUILT' },
    refused: { code: 'auth', message: 'the vault is locked' },
    sdk: `file://${STAGE}/libs/sdk/dist/index.js`,
    client: `file://${STAGE}/libs/client/dist/index.js`,
  });
  // A task run: planned through the openai SDK, into an `http` node.
  const task = await runThrough(port, { task: 'fetch it' });
  expect({
    status: task.status,
    fetch: task.nodes.fetch?.status,
    http: task.nodes.fetch?.output?.status,
  }).toEqual({ status: 'succeeded', fetch: 'succeeded', http: 200 });
  expect(tools.hitsOf('fetch')).toHaveLength(1);
  // A loop-mode run: its prompt holds the skill, whose YAML front matter was read.
  const before = model.requests.length;
  expect((await runThrough(port, { task: 'follow the skill', mode: 'loop' })).status).toBe('succeeded');
  const asked = model.requests.slice(before).find((r) => !isPlannerCall(r));
  expect(asked?.messages.find((m) => m.role === 'system')?.content).toContain('FETCH WITH THE HTTP TOOL');
  // The console's browser code, bundled by the built API with the built client inside.
  const script = await fetch(`http://127.0.0.1:${port}/console/console.js`);
  expect(script.status).toBe(200);
}, 120_000);
