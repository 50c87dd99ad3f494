/**
 * Memory and the reflect loop on a real Redis with the reflect pool running, with the default
 * lifecycle: settled runs fill the agent's memory, a failure streak triggers a reflection, a
 * service that keeps failing becomes a hard lesson on probation (calls still reach it) and, once
 * later failures support it, an active one that refuses calls to it (no network call); a probe
 * that finds it back retires the lesson; template lessons set timeouts, retry a rate-limited
 * service's 429s more and further apart, and give a model node whose answers keep failing its
 * schema temperature 0 and the schema in its prompt; the API reads and overrides it all.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scopedName, type RunDocument } from '@tetraloop/core/domain';
import { lessonId, summarize, type Lesson } from '@tetraloop/core/memory';
import { MemoryStore, RunStore, probeKey } from '@tetraloop/core/state';
import { lessonRecord, proposedLesson } from './support/lessons.js';
import { post, runToEnd, runToFinalized, startStack, withReflection, type Stack } from './support/stack.js';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let healthy: ToolServer;
let broken: ToolServer;
let redis: Redis;
let memory: MemoryStore;
let model: ModelServer;

/** Whether a model request carries what an invalid-answer lesson adds: temperature 0 and the schema. */
const shapedByLesson = (req: ChatRequest): boolean =>
  req.temperature === 0 &&
  req.messages.some((m) => m.role === 'system' && m.content?.includes('matches this JSON schema'));

beforeAll(async () => {
  healthy = await startToolServer();
  broken = await startToolServer();
  // Answers outside the node's schema unless the call is shaped by an invalid-answer lesson.
  model = await startModelServer({
    script: (req) => ({ content: shapedByLesson(req) ? '{"ok":true}' : '{"ok":"maybe"}' }),
  });
  stack = await startStack({
    pools: ['plan', 'tool', 'reflect'],
    env: {
      // Read lessons on every call, so a test sees a change at once; no retries, so counts are exact.
      TETRALOOP_LESSON_REFRESH_MS: '0',
      TETRALOOP_RETRIES: JSON.stringify({ server: 0, timeout: 0 }),
      TETRALOOP_TOOL_TIMEOUT_MS: '1000',
      // Short retry delays, and a rate-limit lesson's floor well above them.
      TETRALOOP_BACKOFF_BASE_MS: '20',
      TETRALOOP_LESSON_RATE_LIMIT_BACKOFF_MS: '500',
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
  memory = new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 });
});
afterAll(async () => {
  await stack?.close();
  await healthy?.close();
  await broken?.close();
  await model?.close();
  redis?.disconnect();
});

const host = (server: ToolServer): string => new URL(server.url).host;
const call = (agentId: string, url: string): unknown => ({
  agentId,
  graph: { nodes: [{ id: 'fetch', kind: 'tool', tool: 'http', args: { url } }] },
});
/**
 * Five failing runs of one agent, one after the other: from the third on, each failure in a row
 * asks for a reflection, awaited before the next run. Answers the agent's first lesson's status
 * after each of those three reflections.
 */
async function failingRuns(
  agentId: string,
  run: (i: number) => Promise<RunDocument>,
  check: (doc: RunDocument) => void,
): Promise<string[]> {
  const statuses: string[] = [];
  for (let i = 0; i < 5; i++) {
    const doc = i < 2 ? await run(i) : await withReflection(stack, agentId, () => run(i));
    check(doc);
    if (i >= 2) statuses.push((await lessonsOf(agentId)).lessons[0]!.status);
  }
  return statuses;
}
const lessonsOf = async (agentId: string, status?: string): Promise<{ version: number; lessons: Lesson[] }> =>
  (await fetch(`${stack.url}/v1/agents/${agentId}/lessons${status ? `?status=${status}` : ''}`).then((r) =>
    r.json(),
  )) as { version: number; lessons: Lesson[] };

describe('the reflect loop', () => {
  it('learns that a failing service is down, on probation first, then refuses calls to it, and lets a probe find it back', async () => {
    const agentId = 'hard';
    // Three failed runs in a row trigger a reflection of the agent: it proposes the lesson, on probation.
    const failed = await withReflection(stack, agentId, async () => {
      const docs: RunDocument[] = [];
      for (let i = 0; i < 3; i++)
        docs.push(await runToEnd(stack.url, call(agentId, `${broken.url}/status/503?node=d${i}`)));
      return docs;
    });
    expect(failed.map((d) => d.status)).toEqual(['failed', 'failed', 'failed']);
    const proposed = await lessonsOf(agentId);
    expect(proposed.version).toBe(0);
    expect(proposed.lessons).toEqual([
      expect.objectContaining({
        id: lessonId(agentId, 'service-down', { tool: 'http', host: host(broken) }),
        kind: 'hard',
        status: 'probation',
        cases: 3,
        scope: { tool: 'http', host: host(broken) },
      }),
    ]);
    // On probation it has no effect: the next calls still reach the service (and fail again). Each
    // failure in a row asks for a reflection; the second one after the lesson's proposal activates it.
    const statuses: string[] = [];
    for (const node of ['d3', 'd4']) {
      const tried = await withReflection(stack, agentId, () =>
        runToEnd(stack.url, call(agentId, `${broken.url}/status/503?node=${node}`)),
      );
      expect(tried.nodes.fetch).toMatchObject({ status: 'failed', error: { code: 'server' } });
      expect(tried.nodes.fetch!.attempts[0]!.lessons).toBeUndefined();
      expect(broken.hitsOf(node)).toHaveLength(1);
      failed.push(tried);
      statuses.push((await lessonsOf(agentId)).lessons[0]!.status);
    }
    expect(statuses).toEqual(['probation', 'active']);
    const { lessons, version } = await lessonsOf(agentId);
    expect(version).toBe(1);
    expect(lessons).toHaveLength(1);
    const [lesson] = lessons;
    expect(lesson).toMatchObject({ kind: 'hard', status: 'active', cases: 5 });
    expect([...lesson!.evidence].sort()).toEqual(failed.map((d) => d.runId).sort());

    // A probe just went out: the next call is refused without reaching the service.
    await redis.set(probeKey(stack.prefix, agentId, lesson!.id), '1', 'PX', 60_000);
    const refused = await runToEnd(stack.url, call(agentId, `${broken.url}/work?node=refused`));
    expect(refused.status).toBe('failed');
    expect(refused.nodes.fetch).toMatchObject({
      status: 'failed',
      error: { code: 'blocked_by_lesson', lessonId: lesson!.id },
      attempts: [{ tool: 'http', target: host(broken), lessons: [lesson!.id] }],
    });
    expect(broken.hitsOf('refused')).toHaveLength(0);
    // Other agents and other services are not touched by it.
    expect((await runToEnd(stack.url, call('other', `${broken.url}/work?node=other`))).status).toBe(
      'succeeded',
    );
    expect((await runToEnd(stack.url, call(agentId, `${healthy.url}/work?node=fine`))).status).toBe(
      'succeeded',
    );

    // The probe interval passed: one call goes through, finds the service back, and retires the lesson.
    await redis.del(probeKey(stack.prefix, agentId, lesson!.id));
    const probe = await runToEnd(stack.url, call(agentId, `${broken.url}/work?node=probe`));
    expect(probe.status).toBe('succeeded');
    expect(broken.hitsOf('probe')).toHaveLength(1);
    const after = await lessonsOf(agentId, 'retired');
    expect(after.lessons.map((l) => l.id)).toEqual([lesson!.id]);
    expect(after.version).toBe(2);
    expect((await runToEnd(stack.url, call(agentId, `${broken.url}/work?node=back`))).status).toBe(
      'succeeded',
    );
  });

  it('gives calls to a service a template lesson names the timeout it says', async () => {
    const agentId = 'template';
    const now = new Date().toISOString();
    const lesson = lessonRecord(
      {
        agentId,
        kind: 'template',
        rule: 'slow-service',
        scope: { tool: 'http', host: host(healthy) },
        statement: 'slow',
        effect: { timeoutMs: 3000 },
      },
      now,
    );
    const { id } = lesson;
    // Without the lesson the 1 s default cuts the call off; with it the call gets 3 s.
    const cut = await runToEnd(stack.url, call(agentId, `${healthy.url}/work?node=slow1&ms=1500`));
    expect(cut.nodes.fetch).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
    await memory.saveReflection(agentId, [lesson], true, now);
    const done = await runToEnd(stack.url, call(agentId, `${healthy.url}/work?node=slow2&ms=1500`));
    expect(done.status).toBe('succeeded');
    expect(done.nodes.fetch).toMatchObject({ attempts: [{ target: host(healthy), lessons: [id] }] });
    // A node's own timeout still wins.
    const own = await runToEnd(stack.url, {
      agentId,
      graph: {
        nodes: [
          {
            id: 'fetch',
            kind: 'tool',
            tool: 'http',
            timeoutMs: 500,
            args: { url: `${healthy.url}/work?node=slow3&ms=1500` },
          },
        ],
      },
    });
    expect(own.nodes.fetch).toMatchObject({
      status: 'failed',
      error: { code: 'timeout', message: 'timed out after 500 ms' },
    });
  });
});

describe('template lessons learned from the record', () => {
  it('learns that a service rate-limits, and retries its 429s more often and further apart', async () => {
    const agentId = 'busy';
    const limited = (node: string, fail: number, retry?: object): unknown => ({
      agentId,
      graph: {
        nodes: [
          {
            id: 'fetch',
            kind: 'tool',
            tool: 'http',
            ...(retry ? { retry } : {}),
            args: { url: `${healthy.url}/flaky?node=${node}&fail=${fail}&status=429` },
          },
        ],
      },
    });
    // Runs answered 429 (no retries): the third failure in a row asks for a reflection, which
    // proposes the lesson; each later one asks again, and the second after it activates it.
    const statuses = await failingRuns(
      agentId,
      (i) => runToEnd(stack.url, limited(`rl${i}`, 10, { rate_limited: 0 })),
      (doc) => expect(doc.nodes.fetch).toMatchObject({ status: 'failed', error: { code: 'rate_limited' } }),
    );
    expect(statuses).toEqual(['probation', 'probation', 'active']);
    const { lessons } = await lessonsOf(agentId);
    const id = lessonId(agentId, 'rate-limited', { tool: 'http', host: host(healthy) });
    expect(lessons).toEqual([
      expect.objectContaining({
        id,
        kind: 'template',
        status: 'active',
        effect: { retries: 4, backoffFloorMs: 500 },
      }),
    ]);

    // Without the lesson, three retries of a 429 (the default) would not outlast four of them; the
    // lesson's four do, each at least its floor apart.
    const done = await runToEnd(stack.url, limited('rl-after', 4));
    expect(done.status).toBe('succeeded');
    const attempts = done.nodes.fetch!.attempts;
    expect(attempts).toHaveLength(5);
    for (const retried of attempts.slice(0, 4)) {
      expect(retried).toMatchObject({ error: { code: 'rate_limited' }, lessons: [id] });
      expect(retried.retryDelayMs).toBeGreaterThanOrEqual(500);
    }
    const hits = healthy.hitsOf('rl-after');
    expect(hits).toHaveLength(5);
    for (let i = 1; i < hits.length; i++)
      expect(hits[i]!.start - hits[i - 1]!.start).toBeGreaterThanOrEqual(190);
    // A node's own retries for the class still win.
    const own = await runToEnd(stack.url, limited('rl-own', 4, { rate_limited: 1 }));
    expect(own.nodes.fetch!.attempts).toHaveLength(2);
  });

  it('learns that a model node answers outside its schema, and shapes its calls until it does not', async () => {
    const agentId = 'answers';
    const extract = {
      agentId,
      graph: {
        nodes: [
          {
            id: 'extract',
            kind: 'llm',
            prompt: 'Is the shipment on time?',
            schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
          },
        ],
      },
    };
    // Proposed at the third failure in a row, in effect once two more support it.
    const statuses = await failingRuns(
      agentId,
      () => runToEnd(stack.url, extract),
      (doc) =>
        expect(doc.nodes.extract).toMatchObject({
          status: 'failed',
          error: { code: 'validation', invalidAnswer: true },
          attempts: [{ tool: 'llm', target: 'gpt-4o-mini' }],
        }),
    );
    expect(statuses).toEqual(['probation', 'probation', 'active']);
    const id = lessonId(agentId, 'invalid-answer', { tool: 'llm', host: 'gpt-4o-mini', node: 'extract' });
    expect((await lessonsOf(agentId)).lessons).toEqual([
      expect.objectContaining({
        id,
        kind: 'template',
        status: 'active',
        scope: { tool: 'llm', host: 'gpt-4o-mini', node: 'extract' },
        effect: { temperature: 0, schemaInPrompt: true },
      }),
    ]);
    const before = model.requests.length;
    const done = await runToEnd(stack.url, extract);
    expect(done.status).toBe('succeeded');
    expect(done.nodes.extract).toMatchObject({ output: { ok: true }, attempts: [{ lessons: [id] }] });
    expect(model.requests.slice(before).every(shapedByLesson)).toBe(true);
  });
});

describe('memory and lessons over HTTP', () => {
  it('shows an agent its memory: the latest runs and the counters per service', async () => {
    const agentId = `mem-${randomUUID().slice(0, 8)}`;
    await runToFinalized(stack, call(agentId, `${healthy.url}/work?node=m1`));
    await runToFinalized(stack, call(agentId, `${healthy.url}/status/500?node=m2`));
    const body = (await fetch(`${stack.url}/v1/agents/${agentId}/memory`).then((r) => r.json())) as {
      runs: { status: string; calls: { outcome: string }[] }[];
      services: { tool: string; target: string; calls: number; failures: Record<string, number> }[];
    };
    expect(body.runs.map((r) => r.status)).toEqual(['failed', 'succeeded']);
    expect(body.runs[0]!.calls).toMatchObject([{ outcome: 'server' }]);
    expect(body.services).toEqual([
      expect.objectContaining({ tool: 'http', target: host(healthy), calls: 2, failures: { server: 1 } }),
    ]);
  });

  it('records a settled run as its document says: the same summary, read without the whole document', async () => {
    const agentId = `sum-${randomUUID().slice(0, 8)}`;
    const doc = await runToFinalized(stack, {
      agentId,
      graph: {
        nodes: [
          { id: 'ok', kind: 'tool', tool: 'http', args: { url: `${healthy.url}/work?node=s1` } },
          { id: 'fine', kind: 'tool', tool: 'json', args: { value: 1 } },
          // Retried once: two attempts, both failed.
          {
            id: 'down',
            kind: 'tool',
            tool: 'http',
            retry: { server: 1 },
            args: { url: `${healthy.url}/status/500?node=s2` },
          },
          { id: 'never', kind: 'tool', tool: 'json', args: { value: 2 } },
        ],
        edges: [
          ['ok', 'down'],
          ['down', 'never'],
        ],
      },
    });
    expect(doc.status).toBe('failed');
    expect(doc.nodes.down!.attempts).toHaveLength(2);
    const [recorded] = await memory.hotSet(scopedName('default', agentId));
    expect(recorded).toEqual(summarize(doc, doc.planning?.lessons ?? []));
    expect(recorded!.calls.map((c) => [c.node, c.outcome])).toEqual([
      ['ok', 'ok'],
      ['fine', 'ok'],
      ['down', 'server'],
      ['down', 'server'],
    ]);
  });

  it('reflects on request, overrides a lesson, and takes feedback, with clear errors', async () => {
    const agentId = 'api';
    const reflect = await post(stack.url, `/v1/agents/${agentId}/reflect`);
    expect(reflect).toEqual({ status: 202, body: { agentId, jobId: `reflect-${agentId}` } });
    expect((await post(stack.url, '/v1/agents/bad!id/reflect')).status).toBe(400);

    const now = new Date().toISOString();
    const proposed = proposedLesson(agentId, now);
    const { id } = proposed;
    await memory.saveReflection(agentId, [proposed], false, now);
    const patch = (lesson: string, body: unknown): Promise<Response> =>
      fetch(`${stack.url}/v1/lessons/${lesson}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const pinned = await patch(id, { status: 'pinned' });
    expect(pinned.status).toBe(200);
    expect(await pinned.json()).toMatchObject({ id, status: 'pinned' });
    expect((await lessonsOf(agentId, 'pinned')).lessons.map((l) => l.id)).toEqual([id]);
    expect((await patch(id, { status: 'probation' })).status).toBe(400);
    expect((await patch(`${agentId}.000000000000`, { status: 'retired' })).status).toBe(404);
    expect((await patch('not-a-lesson', { status: 'retired' })).status).toBe(400);

    const run = await runToEnd(stack.url, call(agentId, `${healthy.url}/work?node=fb`));
    expect(
      (await post(stack.url, `/v1/runs/${run.runId}/feedback`, { score: -1, comment: 'wrong' })).status,
    ).toBe(202);
    expect((await post(stack.url, `/v1/runs/${run.runId}/feedback`, { score: 2 })).status).toBe(400);
    expect((await post(stack.url, `/v1/runs/${randomUUID()}/feedback`, { score: 1 })).status).toBe(404);
    // The rating is kept with the run, after its end.
    const runs = new RunStore(redis, { prefix: stack.prefix, retentionSeconds: 60 });
    const events = await runs.events(run.runId, 0);
    expect(events.at(-1)).toMatchObject({ type: 'feedback', data: { score: -1, comment: 'wrong' } });
  });
});

describe('with the reflect loop off', () => {
  it('keeps no memory and answers its routes 409 reflect_off', async () => {
    const off = await startStack({ env: { TETRALOOP_REFLECT: 'off' } });
    try {
      // Its finalize pass done, where memory would have been written.
      const doc = await runToFinalized(off, call('quiet', `${healthy.url}/work?node=off`));
      expect(doc.status).toBe('succeeded');
      const res = await fetch(`${off.url}/v1/agents/quiet/lessons`);
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ error: { code: 'reflect_off' } });
      const quiet = new MemoryStore(redis, { prefix: off.prefix, hotRuns: 200, useBonus: 0.05 });
      expect(await quiet.hotSet('quiet')).toEqual([]);
    } finally {
      await off.close();
    }
  });
});
