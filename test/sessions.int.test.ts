/**
 * Sessions and the sense loop on a real Redis: lanes and their modes, commands, transcripts,
 * NO_REPLY, environment versions and steering, deduplication, bursts, sources; session keys
 * outside the API's alphabet refused on every path that names a session.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import type { RunDocument } from '@tetraloop/core/domain';
import { HookRegistry } from '@tetraloop/core/hooks';
import { SENSE_JOB } from '@tetraloop/core/sessions';
import { tenantRunsKey, type SessionView } from '@tetraloop/core/state';
import {
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './support/model-server.js';
import {
  followJobEvents,
  isJobEnd,
  laneIdle,
  post,
  postWebhook,
  startStack,
  untilEvent,
  waitFor,
  type Stack,
} from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
const SECRET = 'hooks-secret-0123456789';
let model: ModelServer;
let tools: ToolServer;
/** How the scripted agent answers; by default it echoes the last user message after `latencyMs`. */
let answer: (request: ChatRequest) => ScriptedReply | Promise<ScriptedReply>;
/** Replies that went through message_sending. */
const sending: { runId: string; text: string }[] = [];
const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
const echo =
  (latencyMs = 0) =>
  (r: ChatRequest): ScriptedReply => ({ content: `echo: ${lastUser(r)}`, latencyMs });

beforeAll(async () => {
  tools = await startToolServer();
  answer = echo();
  model = await startModelServer({ script: (r) => answer(r) });
  const registry = new HookRegistry();
  registry.on('message_sending', ({ runId, text }) => {
    sending.push({ runId, text });
    return undefined;
  });
  stack = await startStack({
    hooks: { registry },
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_COLLECT_DEBOUNCE_MS: '150',
      TETRALOOP_COLLECT_CAP: '3',
      TETRALOOP_FOLLOWUP_CAP: '2',
      TETRALOOP_LANE_SWEEP_MS: '500',
      TETRALOOP_ENV_CHECK_MS: '200',
      TETRALOOP_BURST_WINDOW_MS: '300',
      TETRALOOP_WORKSPACE_DIR: new URL('./fixtures/workspace', import.meta.url).pathname,
      TETRALOOP_WEBHOOKS: JSON.stringify([{ name: 'hooks', secret: SECRET }]),
      TETRALOOP_SOURCES: JSON.stringify([
        {
          name: 'slow',
          url: `${tools.url}/hang?node=slow`,
          intervalMs: 200,
          timeoutMs: 500,
          sessionKey: 'src',
        },
        {
          name: 'fast',
          url: `${tools.url}/count?node=fast`,
          intervalMs: 200,
          timeoutMs: 500,
          sessionKey: 'src',
          type: 'tick',
        },
      ]),
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
  await tools?.close();
});

interface Placed {
  sessionKey: string;
  runId?: string;
  queued: boolean;
  position?: number;
  duplicate?: boolean;
}
const say = async (key: string, text: string, extra: object = {}): Promise<Placed> => {
  const res = await post(stack.url, `/v1/sessions/${key}/messages`, { text, ...extra });
  expect(res.status).toBe(202);
  return res.body as unknown as Placed;
};
const session = async (key: string): Promise<SessionView> =>
  (await fetch(`${stack.url}/v1/sessions/${key}`).then((r) => r.json())) as SessionView;
const transcript = async (key: string): Promise<Record<string, unknown>[]> =>
  (await fetch(`${stack.url}/v1/sessions/${key}/transcript`).then((r) => r.text()))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const idle = (key: string): Promise<void> => laneIdle(stack, key);
const interval = (d: RunDocument): [number, number] => [Date.parse(d.startedAt!), Date.parse(d.finishedAt!)];

describe('lanes', () => {
  it('run one session in order without overlap, and two sessions side by side', async () => {
    // The first run's answer is held until lane-b's run has asked the model: a2 is placed while a1
    // runs, and b1 overlaps a1, however slow the machine is.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    answer = async (r) => {
      if (lastUser(r) === 'first') await held;
      if (lastUser(r) === 'other') release();
      return echo(0)(r);
    };
    const a1 = await say('lane-a', 'first', { mode: 'followup' });
    const a2 = await say('lane-a', 'second', { mode: 'followup' });
    const b1 = await say('lane-b', 'other');
    expect(a1).toMatchObject({ queued: false });
    expect(a2).toMatchObject({ queued: true, position: 1 });
    const queuedDoc = (await fetch(`${stack.url}/v1/runs/${a2.runId}`).then((r) => r.json())) as RunDocument;
    expect(queuedDoc).toMatchObject({ status: 'queued', sessionKey: 'lane-a', lanePosition: 1 });
    const [d1, d2, db] = await Promise.all([a1, a2, b1].map((p) => waitFor(stack.url, p.runId!)));
    const [s1, e1] = interval(d1!);
    const [s2] = interval(d2!);
    const [sb, eb] = interval(db!);
    expect(s2).toBeGreaterThanOrEqual(e1);
    expect(sb < e1 && s1 < eb).toBe(true);
    expect(d2!.nodes.agent).toMatchObject({ output: { text: 'echo: second' } });
  });

  it('collect merges the messages that arrive while busy into one run, within the cap', async () => {
    // The first run's answer is held until all five messages are queued, so none of them can
    // arrive after the lane has already drained the others, however slow the machine is.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    answer = async (r) => {
      if (lastUser(r) === 'start') await held;
      return echo(0)(r);
    };
    const first = await say('collect', 'start');
    for (const text of ['one', 'two', 'three', 'four', 'five']) {
      expect(await say('collect', text, { mode: 'collect' })).toMatchObject({ queued: true, position: 1 });
    }
    release();
    await waitFor(stack.url, first.runId!);
    await idle('collect');
    const runs = (await transcript('collect')).filter((l) => l.type === 'run');
    expect(runs).toHaveLength(2);
    const merged = (await fetch(`${stack.url}/v1/runs/${runs[1]!.runId as string}`).then((r) =>
      r.json(),
    )) as RunDocument;
    // The cap is 3 with the summarize policy: the oldest messages are folded, none is lost.
    expect(merged.task).toMatch(/^\[5 messages arrived while you were busy\]/);
    for (const text of ['one', 'two', 'three', 'four', 'five']) expect(merged.task).toContain(text);
  });

  it('/queue sets the mode that messages naming none get, and /queue default clears it', async () => {
    // The deployment's default here is collect; the session asks for followup.
    const set = await post(stack.url, '/v1/sessions/queue/messages', { text: '/queue followup' });
    expect(set.body).toMatchObject({ command: 'queue', mode: 'followup', queued: false });
    expect(await session('queue')).toMatchObject({ mode: 'followup' });
    // The first run's answer is held until the queue behind it was looked at.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    answer = async (r) => {
      if (lastUser(r) === 'start') await held;
      return echo(0)(r);
    };
    const first = await say('queue', 'start');
    // No mode given: the session's followup applies, so each waits as a run of its own.
    await say('queue', 'one');
    await say('queue', 'two');
    expect((await session('queue')).queued.map((q) => q.kind)).toEqual(['run', 'run']);
    release();
    await waitFor(stack.url, first.runId!);
    await idle('queue');
    const cleared = await post(stack.url, '/v1/sessions/queue/messages', { text: '/queue default' });
    expect(cleared.body).toMatchObject({ command: 'queue', mode: 'collect' });
    expect(await session('queue')).toMatchObject({ mode: null });
    const commands = (await transcript('queue')).filter((l) => l.type === 'command');
    expect(commands.map((c) => c.mode)).toEqual(['followup', null]);

    const bad = await post(stack.url, '/v1/sessions/queue/messages', { text: '/queue sideways' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      error: {
        code: 'invalid_request',
        issues: [
          { path: 'text', message: '/queue takes one of: followup, collect, steer, interrupt, default' },
        ],
      },
    });
  });

  it('refuses a followup message past TETRALOOP_FOLLOWUP_CAP with 429 lane_full, storing nothing', async () => {
    // "work" holds the lane until the refusal was checked; then "one" holds it while "three" is
    // placed behind the two messages still waiting.
    let releaseWork!: () => void;
    let releaseOne!: () => void;
    const work = new Promise<void>((resolve) => (releaseWork = resolve));
    const oneHeld = new Promise<void>((resolve) => (releaseOne = resolve));
    answer = async (r) => {
      if (lastUser(r) === 'work') await work;
      if (lastUser(r) === 'one') await oneHeld;
      return echo(0)(r);
    };
    const redis = new Redis(stack.env.REDIS_URL!);
    const runIndex = tenantRunsKey(stack.prefix, 'default');
    try {
      const first = await say('full', 'work');
      const one = await say('full', 'one', { mode: 'followup' });
      await say('full', 'two', { mode: 'followup' });
      const lines = (await transcript('full')).length;
      const runs = await redis.zcard(runIndex);

      const refused = await post(stack.url, '/v1/sessions/full/messages', {
        text: 'three',
        mode: 'followup',
        eventId: 'full-3',
      });
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({
        error: {
          code: 'lane_full',
          message: expect.stringMatching(
            /^session "full" has 2 runs waiting in its lane, its most \(TETRALOOP_FOLLOWUP_CAP = 2\)/,
          ),
          issues: [{ path: 'mode', message: 'limit: 2' }],
        },
      });
      // Nothing of it was kept: no transcript line, no run, no place in the lane.
      expect((await transcript('full')).slice(lines)).toEqual([]);
      expect(await redis.zcard(runIndex)).toBe(runs);
      expect((await session('full')).queued).toHaveLength(2);
      // Other modes are not held to the cap.
      expect(await say('full', 'and this', { mode: 'collect' })).toMatchObject({ queued: true });

      // Once a waiting run has started there is room: the same message, its eventId not taken, goes in.
      releaseWork();
      await waitFor(stack.url, first.runId!);
      await untilEvent(stack.url, one.runId!, (e) => e.data.type === 'run.started');
      const taken = await say('full', 'three', { mode: 'followup', eventId: 'full-3' });
      // Behind "two" and the collected message.
      expect(taken).toMatchObject({ queued: true, position: 3 });
    } finally {
      redis.disconnect();
      await say('full', '/stop');
      releaseWork();
      releaseOne();
    }
  });

  it('interrupt cancels the running run and starts the newest message', async () => {
    // The first message's model call, whenever it comes, answers only once it is cancelled.
    answer = (r) => (lastUser(r) === 'slow one' ? { hang: true } : echo(0)(r));
    const first = await say('interrupt', 'slow one');
    const second = await say('interrupt', 'urgent', { mode: 'interrupt' });
    expect(second).toMatchObject({ queued: false });
    expect((await waitFor(stack.url, first.runId!)).status).toBe('cancelled');
    expect((await waitFor(stack.url, second.runId!)).status).toBe('succeeded');
  });

  it('/stop cancels the running run and clears the queue', async () => {
    // The running run's model call answers only once /stop cancels it.
    answer = (r) => (lastUser(r) === 'work' ? { hang: true } : echo(0)(r));
    const first = await say('stop', 'work');
    const queued = await say('stop', 'more', { mode: 'followup' });
    await say('stop', '/stop');
    expect((await waitFor(stack.url, first.runId!)).status).toBe('cancelled');
    expect((await waitFor(stack.url, queued.runId!)).status).toBe('cancelled');
    const view = await session('stop');
    expect(view).toMatchObject({ running: null, queued: [] });
    expect((await transcript('stop')).some((l) => l.type === 'command' && l.command === 'stop')).toBe(true);
  });

  it('/new starts a fresh context: the next run no longer sees the earlier conversation', async () => {
    answer = echo(0);
    const first = await say('fresh', 'my name is Ana');
    await waitFor(stack.url, first.runId!);
    await idle('fresh');
    const before = model.requests.length;
    const second = await say('fresh', 'what is my name?');
    await waitFor(stack.url, second.runId!);
    await idle('fresh');
    expect(model.requests[before]!.messages[0]!.content).toContain('my name is Ana');
    expect((await say('fresh', '/new')).queued).toBe(false);
    const after = model.requests.length;
    const third = await say('fresh', 'what is my name?');
    await waitFor(stack.url, third.runId!);
    expect(model.requests[after]!.messages[0]!.content).not.toContain('my name is Ana');
  });

  it('take a message with {{braces}} literally', async () => {
    answer = echo(0);
    const placed = await say('braces', 'what does {{x.output}} mean?');
    const doc = await waitFor(stack.url, placed.runId!);
    expect(doc.status).toBe('succeeded');
    expect((doc.nodes.agent as { output: { text: string } }).output.text).toContain('x.output}} mean?');
  });

  it('ignore a message whose eventId was seen', async () => {
    answer = echo(0);
    const first = await say('dedupe', 'hello', { eventId: 'evt-1' });
    const again = await say('dedupe', 'hello', { eventId: 'evt-1' });
    expect(again).toMatchObject({ duplicate: true, queued: false });
    await waitFor(stack.url, first.runId!);
    expect(
      (await transcript('dedupe')).filter((l) => l.type === 'message' && l.role === 'user'),
    ).toHaveLength(1);
  });
});

describe('session keys', () => {
  // `acme~victim` is how acme's session `victim` is stored; `Zz~…` would make a tenant nobody can delete.
  const CROSSING = ['acme~victim', 'Zz~a}b{c d'];

  it("are refused with 400 by the API's session routes when outside the alphabet", async () => {
    for (const key of CROSSING.map(encodeURIComponent)) {
      const sent = await post(stack.url, `/v1/sessions/${key}/messages`, { text: 'hi' });
      expect(sent, key).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
      for (const path of [`/v1/sessions/${key}`, `/v1/sessions/${key}/transcript`]) {
        expect((await fetch(`${stack.url}${path}`)).status, path).toBe(400);
      }
    }
  });

  it("are checked again by the sense loop: a message or event job naming another tenant's session fails, writing nothing", async () => {
    const redis = new Redis(stack.env.REDIS_URL!);
    const sense = new Queue('sense', { connection: redis, prefix: stack.prefix });
    const events = await followJobEvents(stack, ['sense']);
    try {
      // Jobs as a process that skipped the API's check would put them: a message of session
      // `Zz~a}b{c d`, a default-tenant source's event for `acme~victim`.
      const jobs = [
        await sense.add(SENSE_JOB.message, { sessionKey: CROSSING[1], message: { text: 'hi' } }),
        await sense.add(SENSE_JOB.event, {
          source: 'hooks',
          tenant: 'default',
          event: { eventId: 'cross', type: 'push', sessionKey: CROSSING[0], payload: { injected: true } },
        }),
      ];
      // Both ends are waited for at once: the jobs may end in either order, and an event `next`
      // passes over is dropped.
      const ended = new Set<string>();
      // A bound on the wait, not a timing check: a loaded CI machine may take a while to fail a job.
      const deadline = Date.now() + 40_000;
      while (ended.size < jobs.length) {
        const end = await events
          .next(
            (e) =>
              jobs.some((job) => job.id === e.jobId) &&
              !ended.has(e.jobId) &&
              (e.event === 'failed' || e.event === 'completed'),
            deadline,
            `the end of sense jobs ${jobs.map((job) => job.name).join(', ')}`,
          )
          .catch(async (err: Error) => {
            // What the sense pool was doing then, so a failure here says why a job did not end.
            const [states, counts, workers, active] = await Promise.all([
              Promise.all(jobs.map(async (job) => `${job.name} ${await job.getState()}`)),
              sense.getJobCounts(),
              sense.getWorkersCount(),
              sense.getActive(0, 10),
            ]);
            const busy = active.map((j) => `${j.name}:${j.id}@${Date.now() - (j.processedOn ?? 0)}ms`);
            throw new Error(
              `${err.message}: ${states.join(', ')}; sense ${JSON.stringify(counts)}, ${workers} workers, active ${busy.join(' ')}`,
            );
          });
        ended.add(end.jobId);
      }
      for (const job of jobs) expect(await job.getState(), job.name).toBe('failed');
      const keys = await redis.keys(`${stack.prefix}:*`);
      expect(keys.filter((k) => k.includes('victim') || k.includes('Zz~'))).toEqual([]);
    } finally {
      events.close();
      await sense.close();
      redis.disconnect();
    }
  }, 90_000);
});

describe('double submissions', () => {
  it('take a message without an eventId sent twice at once in one run; other text is new', async () => {
    answer = echo(0);
    const both = await Promise.all([say('double', 'order pizza'), say('double', 'order pizza')]);
    // The lane decided one way: at most one of them placed a run (a slow sense pool may answer
    // `queued` before it decided), never two.
    expect(both.filter((p) => p.duplicate !== true && p.runId !== undefined).length).toBeLessThanOrEqual(1);
    await idle('double');
    const other = await say('double', 'order sushi');
    expect(other.duplicate).toBeUndefined();
    await idle('double');
    const lines = await transcript('double');
    const users = lines.filter((l) => l.type === 'message' && l.role === 'user');
    expect(users.map((l) => l.text)).toEqual(['order pizza', 'order sushi']);
    // One run answered each: the duplicate left no run behind.
    expect(lines.filter((l) => l.type === 'message' && l.role === 'assistant').map((l) => l.text)).toEqual([
      'echo: order pizza',
      'echo: order sushi',
    ]);
    expect(await session('double')).toMatchObject({ running: null, queued: [] });
  });
});

describe('replies and transcripts', () => {
  it('records messages, tool calls, replies and runs as JSONL, and suppresses NO_REPLY', async () => {
    answer = (r) =>
      r.messages.some((m) => m.role === 'tool')
        ? { content: lastUser(r) === 'quiet' ? 'NO_REPLY' : 'done' }
        : { content: '', toolCalls: [{ name: 'json', arguments: { value: 1 } }] };
    const loud = await say('talk', 'loud');
    await waitFor(stack.url, loud.runId!);
    // The reply is written before the lane moves on; wait for that, then speak again.
    await idle('talk');
    const quiet = await say('talk', 'quiet', { mode: 'followup' });
    await waitFor(stack.url, quiet.runId!);
    await idle('talk');
    const lines = await transcript('talk');
    expect(lines[0]).toMatchObject({ type: 'session', id: 'talk' });
    const kinds = lines
      .slice(1)
      .map((l) => (l.type === 'message' ? `${l.type}:${l.role as string}` : l.type));
    expect(kinds).toEqual([
      'message:user',
      'tool_call',
      'tool_result',
      'message:assistant',
      'run',
      'message:user',
      'tool_call',
      'tool_result',
      'run',
    ]);
    expect(lines.find((l) => l.role === 'assistant')).toMatchObject({ text: 'done', tools: 'json×1' });
    // message_sending saw the real reply, never the NO_REPLY one.
    expect(sending.filter((m) => m.runId === loud.runId)).toEqual([{ runId: loud.runId, text: 'done' }]);
    expect(sending.some((m) => m.runId === quiet.runId)).toBe(false);
  });

  it('give the agent the bootstrap files in order, capped, in the system prompt', async () => {
    answer = echo(0);
    const before = model.requests.length;
    const placed = await say('boot', 'hi');
    await waitFor(stack.url, placed.runId!);
    const system = model.requests.slice(before)[0]!.messages[0]!.content!;
    const order = ['## AGENTS.md', '## SOUL.md', '## USER.md'].map((h) => system.indexOf(h));
    expect(order.every((i) => i > 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(system).not.toContain('## TOOLS.md');
  });
});

describe('the environment', () => {
  it('steer bumps the version and reaches the running agent at its next turn', async () => {
    let turns = 0;
    answer = (r) => {
      turns++;
      return r.messages.some((m) => m.role === 'tool')
        ? { content: `final after ${lastUser(r)}` }
        : {
            content: '',
            toolCalls: [{ name: 'http', arguments: { url: `${tools.url}/gate?node=steer` } }],
          };
    };
    const placed = await say('steer', 'plan a trip');
    // The tool call is held until the steer is in: the agent's next turn must see it.
    await tools.hitCount('steer', 1);
    const steered = await say('steer', 'make it Lisbon', { mode: 'steer' });
    expect(steered).toMatchObject({ runId: placed.runId, queued: false });
    expect((await session('steer')).environmentVersion).toBe(1);
    // The environment check hands the steer to the run; then the agent's turn may go on.
    await untilEvent(stack.url, placed.runId!, (e) => e.data.type === 'environment.changed', {
      what: 'environment.changed',
    });
    tools.openGate('steer');
    const doc = await waitFor(stack.url, placed.runId!);
    expect(doc.nodes.agent).toMatchObject({ output: { text: 'final after [steer] make it Lisbon' } });
    expect(turns).toBe(2);
  });

  it('deduplicates source events and merges a burst into one summary event', async () => {
    // A sender signs each delivery anew: a redelivery of e1 has another timestamp, so it is not a replay.
    const now = Math.floor(Date.now() / 1000);
    const send = (eventId: string, t = now) =>
      postWebhook(
        stack.url,
        'hooks',
        { eventId, type: 'push', sessionKey: 'env', payload: { eventId } },
        SECRET,
        {
          t,
        },
      );
    // The environment moves when a burst's flush job (sense queue) has run: follow those jobs.
    const sense = await followJobEvents(stack, ['sense']);
    try {
      await send('e1');
      await send('e1', now - 1);
      for (const id of ['e2', 'e3', 'e4']) await send(id);
      const deadline = Date.now() + 10_000;
      for (;;) {
        const view = await session('env').catch(() => null);
        if (view && view.environmentVersion >= 1) break;
        await sense.next(
          (e) => e.name === SENSE_JOB.burstFlush && isJobEnd(e),
          deadline,
          "the burst flush that moves session env's environment",
        );
      }
    } finally {
      sense.close();
    }
    let env: { version: number; events: { count?: number; eventId: string }[] } = { version: 0, events: [] };
    const sources = (await fetch(`${stack.url}/v1/sources`).then((r) => r.json())) as {
      sources: { name: string; events: number; duplicates: number }[];
    };
    expect(sources.sources.find((s) => s.name === 'hooks')).toMatchObject({ events: 4, duplicates: 1 });
    env = { version: (await session('env')).environmentVersion, events: [] };
    expect(env.version).toBe(1);
  });

  it("keeps a hanging source from delaying another, and reports each one's status", async () => {
    await tools.hitCount('fast', 3);
    const { sources } = (await fetch(`${stack.url}/v1/sources`).then((r) => r.json())) as {
      sources: { name: string; status: string; events: number; lastError: string | null }[];
    };
    const fast = sources.find((s) => s.name === 'fast');
    expect(fast).toMatchObject({ status: 'ok' });
    expect(fast!.events).toBeGreaterThanOrEqual(2);
    await tools.hitCount('slow', 2);
    const later = (await fetch(`${stack.url}/v1/sources`).then((r) => r.json())) as {
      sources: { name: string; status: string; lastError: string | null }[];
    };
    const slow = later.sources.find((s) => s.name === 'slow');
    expect(['degraded', 'down']).toContain(slow!.status);
    expect(slow!.lastError).toBeTruthy();
  });
});
