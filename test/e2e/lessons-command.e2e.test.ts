/**
 * `tetraloop lessons …` against a running stack (TETRALOOP_API_URL), on lessons written into the
 * agent's memory: the command's function in-process for each case, and the real command as a child
 * process for its exit codes. Exit codes: 0 done, 1 the API said no (unknown lesson, reflect loop
 * off, API unreachable), 2 usage errors.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lessonsCommand } from '@tetraloop/cli';
import { lessonId, type Lesson } from '@tetraloop/core/memory';
import { freePort } from '@tetraloop/core/runtime';
import { MemoryStore } from '@tetraloop/core/state';
import { runTetraloop } from '../support/processes.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let redis: Redis;
let memory: MemoryStore;
const agentId = `ops-${randomUUID().slice(0, 8)}`;
const now = new Date().toISOString();

function lesson(
  fields: Pick<Lesson, 'kind' | 'rule' | 'scope' | 'statement' | 'status' | 'confidence'>,
): Lesson {
  return {
    id: lessonId(agentId, fields.rule, fields.scope),
    agentId,
    cases: 4,
    evidence: ['run-a', 'run-b'],
    missed: 0,
    createdAt: now,
    updatedAt: now,
    version: 1,
    ...fields,
  };
}

const hard = lesson({
  kind: 'hard',
  rule: 'service-down',
  scope: { tool: 'http', host: 'down.test' },
  statement: 'down.test answers 503 to every call',
  status: 'active',
  confidence: 0.8,
});
const soft = lesson({
  kind: 'soft',
  rule: 'service-flaky',
  scope: { tool: 'http', host: 'flaky.test' },
  statement: `flaky.test fails often; ${'prefer another source when one is given. '.repeat(4)}`,
  status: 'probation',
  confidence: 0.3,
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `tetraloop lessons <args>`, in-process: what it printed and the exit code it answered. */
async function cli(args: string[], apiUrl = stack.url): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  const code = await lessonsCommand(args, {
    apiUrl,
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
  });
  return { code, stdout, stderr };
}

beforeAll(async () => {
  stack = await startStack({ pools: ['plan', 'tool'] });
  redis = new Redis(stack.env.REDIS_URL!);
  memory = new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 });
  await memory.saveReflection(agentId, [hard, soft], true, now);
});
afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

describe('tetraloop lessons', () => {
  it("lists an agent's lessons as a table, by status, or as the API's JSON", async () => {
    const all = await cli(['list', agentId]);
    expect(all.stderr).toContain(`agent ${agentId}: 2 lessons (lessons version 1)`);
    expect(all.code).toBe(0);
    const [header, ...rows] = all.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^ID +KIND +STATUS +CONFIDENCE +CASES +SCOPE +UPDATED +STATEMENT$/);
    // Highest confidence first, as the API orders them; the columns line up.
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(
      new RegExp(
        `^${hard.id} +hard +active +0\\.80 +4 +tool=http host=down\\.test +\\S+Z +down\\.test answers`,
      ),
    );
    expect(rows[1]).toMatch(
      new RegExp(`^${soft.id} +soft +probation +0\\.30 +4 +tool=http host=flaky\\.test `),
    );
    expect(rows[1]).toMatch(/…$/);
    expect(rows[1]!.indexOf('probation')).toBe(rows[0]!.indexOf('active'));

    const active = await cli(['list', agentId, '--status', 'active']);
    expect(active.code).toBe(0);
    expect(active.stdout).toContain(hard.id);
    expect(active.stdout).not.toContain(soft.id);

    const json = await cli(['list', agentId, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ agentId, version: 1, lessons: [hard, soft] });

    const none = await cli(['list', 'nobody', '--status', 'pinned']);
    expect(none).toMatchObject({ code: 0, stdout: '' });
    expect(none.stderr).toContain('agent nobody has no pinned lessons');
  });

  it('shows one lesson as JSON', async () => {
    const shown = await cli(['show', soft.id]);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toEqual(soft);
  });

  it("retires, pins and activates a lesson: its status in the agent's memory changes", async () => {
    const retired = await cli(['retire', hard.id]);
    expect(retired.code).toBe(0);
    expect(retired.stderr).toContain(`lesson ${hard.id} is retired`);
    expect(JSON.parse(retired.stdout)).toMatchObject({ id: hard.id, status: 'retired', version: 2 });
    expect((await memory.lesson(agentId, hard.id))?.status).toBe('retired');
    const listed = await cli(['list', agentId, '--status', 'retired']);
    expect(listed.stdout).toContain(hard.id);
    expect(listed.stdout).not.toContain(soft.id);

    expect((await cli(['pin', soft.id])).code).toBe(0);
    expect((await memory.lesson(agentId, soft.id))?.status).toBe('pinned');
    expect((await cli(['activate', hard.id])).code).toBe(0);
    expect((await memory.lesson(agentId, hard.id))?.status).toBe('active');
  });

  it('says so and exits 1 for a lesson that does not exist', async () => {
    const unknown = `${agentId}.000000000000`;
    const [shown, retired, nobody] = await Promise.all([
      cli(['show', unknown]),
      cli(['retire', unknown]),
      cli(['show', 'nobody.0123456789ab']),
    ]);
    expect(shown).toMatchObject({ code: 1, stdout: '' });
    expect(shown.stderr).toContain(`no lesson ${unknown}: agent ${agentId} has 2 other lessons`);
    expect(retired).toMatchObject({ code: 1, stdout: '' });
    expect(retired.stderr).toContain(`no lesson ${unknown}`);
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toContain('no lesson nobody.0123456789ab: agent nobody has no lessons');
  });

  it('exits 1 with the reason when the API cannot answer: unreachable, or the reflect loop off', async () => {
    const closedPort = await freePort();
    const unreachable = await cli(['list', agentId], `http://127.0.0.1:${closedPort}`);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/cannot reach the API at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);

    const off = await startStack({ pools: [], env: { TETRALOOP_REFLECT: 'off' } });
    try {
      const answer = await cli(['show', hard.id], off.url);
      expect(answer.code).toBe(1);
      expect(answer.stderr).toContain('409 reflect_off: the reflect loop is off');
    } finally {
      await off.close();
    }
  });

  it('exits 2 with a clear message on bad usage', async () => {
    const cases: [string[], RegExp][] = [
      [[], /^usage: tetraloop lessons <command>/],
      [['frobnicate'], /unknown lessons command 'frobnicate'/],
      [['list'], /lessons list needs an agent id/],
      [['list', 'bad!agent'], /'bad!agent' is not an agent id/],
      [['list', agentId, 'extra'], /lessons list takes one agent id, got 2/],
      [['list', agentId, '--status', 'bogus'], /--status must be one of probation, active, pinned, retired/],
      [['list', agentId, '--status'], /lessons list: Option '--status <value>' argument missing/],
      [['list', agentId, '--bogus'], /lessons list: Unknown option '--bogus'/],
      [['show'], /lessons show needs a lesson id/],
      [['show', 'not-a-lesson'], /'not-a-lesson' is not a lesson id \(<agentId>\.<12 hex digits>\)/],
      [['retire', hard.id, soft.id], /lessons retire takes one lesson id, got 2/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args)));
    results.forEach((result, i) => {
      const [args, message] = cases[i]!;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr, args.join(' ')).toMatch(message);
    });
    // Nothing was changed by any of them.
    expect((await memory.lessons(agentId)).lessons.map((l) => l.status).sort()).toEqual(['active', 'pinned']);
  });

  it('exits 0, 1 and 2 as the real command, and is in its usage', async () => {
    const env = { TETRALOOP_API_URL: stack.url, LOG_LEVEL: 'silent' };
    const [listed, unknown, usage, bare, worker] = await Promise.all([
      runTetraloop(['lessons', 'list', agentId, '--status', 'pinned'], env),
      runTetraloop(['lessons', 'show', `${agentId}.000000000000`], env),
      runTetraloop(['lessons', 'show', 'not-a-lesson'], env),
      runTetraloop([], env),
      runTetraloop(['worker', '--bogus'], env),
    ]);
    expect(listed).toMatchObject({
      code: 0,
      stderr: `agent ${agentId}: 1 pinned lesson (lessons version 4)\n`,
    });
    expect(listed.stdout).toContain(soft.id);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`no lesson ${agentId}.000000000000`);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("'not-a-lesson' is not a lesson id");
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('lessons list <agentId> [--status probation|active|pinned|retired]');
    // Other commands' unknown options are usage errors too.
    expect(worker.code).toBe(2);
    expect(worker.stderr).toMatch(/^worker: Unknown option '--bogus'/);
  });
});
