import { describe, expect, it } from 'vitest';
import { LATENCY_BUCKETS_MS, bucketOf, quantile } from './latency.js';
import { DEFAULT_LIFECYCLE, lessonId, reflectLessons } from './lesson-lifecycle.js';
import { DEFAULT_RULE_SETTINGS, MODEL_CALL_TOOL, candidateLessons } from './lesson-rules.js';
import type { Lesson } from './lesson.js';
import type { CallRecord, RunSummary } from './run-summary.js';
import {
  INVALID_ANSWER,
  MAX_CALLS,
  fingerprintOf,
  normaliseTask,
  outcomeOf,
  summarize,
} from './run-summary.js';
import type { RunDocument } from '../domain/run-model.js';

const NOW = '2026-11-30T00:00:00.000Z';
let n = 0;
/** A run summary with the given calls (each `[target, outcome, ms]`) of `tool`. */
function run(calls: [string, string, number?][], tool = 'http'): RunSummary {
  n++;
  const records: CallRecord[] = calls.map(([target, outcome, ms]) => ({
    node: 'n',
    tool,
    target,
    ms: ms ?? 20,
    outcome,
  }));
  const failed = records.some((c) => c.outcome !== 'ok');
  return {
    runId: `run-${n}`,
    agentId: 'main',
    fingerprint: 'graph:x',
    status: failed ? 'failed' : 'succeeded',
    finishedAt: NOW,
    durationMs: 10,
    tokens: 0,
    calls: records,
    lessons: [],
  };
}

describe('latency buckets', () => {
  it('count a call in the bucket of its duration and read percentiles as bucket bounds', () => {
    expect(bucketOf(5)).toBe(0);
    expect(bucketOf(10)).toBe(0);
    expect(bucketOf(11)).toBe(1);
    expect(bucketOf(999_999)).toBe(LATENCY_BUCKETS_MS.length);
    const counts = new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0);
    counts[bucketOf(40)] = 90;
    counts[bucketOf(4000)] = 10;
    expect(quantile(counts, 0.5)).toBe(50);
    expect(quantile(counts, 0.95)).toBe(5000);
    expect(
      quantile(
        counts.map(() => 0),
        0.5,
      ),
    ).toBeUndefined();
  });
});

describe('fingerprints', () => {
  it('are the same for the same task however it is spaced or cased, and differ by graph', () => {
    expect(normaliseTask('  Fetch  the\\nPrices ')).toBe(normaliseTask('fetch the\\nprices'));
    expect(fingerprintOf({ task: 'Fetch prices', graph: null })).toBe(
      fingerprintOf({ task: ' fetch  PRICES', graph: null }),
    );
    const g = { nodes: [], edges: [] };
    expect(fingerprintOf({ task: null, graph: g })).toMatch(/^graph:[0-9a-f]{16}$/);
  });
});

describe('run summaries', () => {
  it('keep at most MAX_CALLS calls of a large run, failures first, and count the rest', () => {
    const attempts = (outcome: string) => ({
      attempts: [
        {
          attempt: 1,
          startedAt: NOW,
          finishedAt: NOW,
          durationMs: 5,
          worker: 'w',
          tool: 'http',
          target: 'h.test',
          ...(outcome === 'ok' ? {} : { error: { code: outcome, message: 'x' } }),
        },
      ],
    });
    const nodes = Object.fromEntries([
      ...Array.from({ length: MAX_CALLS + 50 }, (_, i) => [
        `ok${i}`,
        { id: `ok${i}`, status: 'succeeded', finishedAt: NOW, durationMs: 5, ...attempts('ok') },
      ]),
      ['bad', { id: 'bad', status: 'failed', finishedAt: NOW, durationMs: 5, ...attempts('server') }],
    ]);
    const doc = {
      runId: 'r',
      agentId: 'main',
      status: 'failed',
      createdAt: NOW,
      finishedAt: NOW,
      task: null,
      graph: { nodes: [], edges: [] },
      usage: { totalTokens: 0 },
      error: { code: 'node_failed', message: 'x' },
      nodes,
    } as unknown as RunDocument;
    const summary = summarize(doc);
    expect(summary.calls).toHaveLength(MAX_CALLS);
    expect(summary.calls[0]).toMatchObject({ node: 'bad', outcome: 'server', target: 'h.test' });
    expect(summary.moreCalls).toBe(51);
    expect(summary.error).toBe('node_failed');
  });
});

describe('the rules', () => {
  it('find a service that is down (hard) only with failures in several runs', () => {
    const hot = [
      run([['down.test', 'server']]),
      run([['down.test', 'server']]),
      run([['down.test', 'network']]),
    ];
    const [lesson, ...rest] = candidateLessons(hot);
    expect(rest).toEqual([]);
    expect(lesson).toMatchObject({
      kind: 'hard',
      rule: 'service-down',
      scope: { tool: 'http', host: 'down.test' },
      evidence: ['run-1', 'run-2', 'run-3'].filter((id) => hot.some((r) => r.runId === id)),
      confidence: 0.6,
    });
    expect(candidateLessons(hot.slice(0, 2))).toEqual([]);
  });

  it('name a custom tool (its calls keyed by its name) as the service, once', () => {
    const down = (target: string, tool?: string) =>
      candidateLessons([1, 2, 3].map(() => run([[target, 'server']], tool)))[0]?.statement;
    expect(down('crm.lookup', 'crm.lookup')).toMatch(/^crm\.lookup is down: 3 of 3 recent calls/);
    expect(down('down.test')).toMatch(/^down\.test is down for http: 3 of 3 recent calls/);
  });

  it('do not find a service down whose latest call succeeded (a probe found it back)', () => {
    const hot = [
      run([['back.test', 'ok']]),
      ...Array.from({ length: 9 }, () => run([['back.test', 'server']])),
    ];
    expect(candidateLessons(hot).map((c) => c.rule)).not.toContain('service-down');
  });

  it('propose nothing for one isolated failure among healthy calls', () => {
    const hot = [...Array.from({ length: 30 }, () => run([['ok.test', 'ok']])), run([['ok.test', 'server']])];
    expect(candidateLessons(hot)).toEqual([]);
  });

  it('find a slow service (template) and give its calls 1.5 × what they need', () => {
    const hot = [
      run([['slow.test', 'timeout', 1000]]),
      run([['slow.test', 'timeout', 1001]]),
      run([['slow.test', 'timeout', 1002]]),
      ...Array.from({ length: 7 }, () => run([['slow.test', 'ok', 900]])),
    ];
    const [lesson] = candidateLessons(hot);
    expect(lesson).toMatchObject({ kind: 'template', rule: 'slow-service', effect: { timeoutMs: 1600 } });
  });

  it('find a flaky service (soft) and name its most frequent failure', () => {
    const hot = [
      run([['flaky.test', 'rate_limited']]),
      run([['flaky.test', 'rate_limited']]),
      run([['flaky.test', 'server']]),
      ...Array.from({ length: 5 }, () => run([['flaky.test', 'ok']])),
    ];
    const [lesson] = candidateLessons(hot);
    expect(lesson).toMatchObject({ kind: 'soft', rule: 'service-flaky' });
    expect(lesson!.statement).toContain('mostly rate_limited');
  });

  it('find a rate-limited service (template): more retries of its 429s, a longer backoff floor', () => {
    const hot = [
      run([['busy.test', 'rate_limited']]),
      run([['busy.test', 'rate_limited']]),
      run([['busy.test', 'rate_limited']]),
      ...Array.from({ length: 7 }, () => run([['busy.test', 'ok']])),
    ];
    const [lesson, ...rest] = candidateLessons(hot);
    expect(rest).toEqual([]);
    expect(lesson).toMatchObject({
      kind: 'template',
      rule: 'rate-limited',
      scope: { tool: 'http', host: 'busy.test' },
      effect: { retries: 4, backoffFloorMs: 5000 },
    });
    const tuned = candidateLessons(hot, {
      ...DEFAULT_RULE_SETTINGS,
      rateLimitRetries: 2,
      rateLimitBackoffMs: 800,
    });
    expect(tuned[0]?.effect).toEqual({ retries: 2, backoffFloorMs: 800 });
    // Two runs are not enough.
    expect(candidateLessons(hot.slice(1))).toEqual([]);
  });

  it('find a model node whose answers keep failing its schema, and only from model calls of that node', () => {
    const model = (node: string, outcome: string): RunSummary => ({
      ...run([]),
      calls: [{ node, tool: MODEL_CALL_TOOL, target: 'gpt-x', ms: 300, outcome }],
    });
    const hot = [
      model('extract', INVALID_ANSWER),
      model('extract', INVALID_ANSWER),
      model('extract', INVALID_ANSWER),
      model('extract', 'ok'),
      model('summary', INVALID_ANSWER),
      model('summary', 'ok'),
      // A model provider failing is not a service a hard lesson could block.
      ...Array.from({ length: 3 }, () => model('other', 'server')),
    ];
    expect(candidateLessons(hot)).toEqual([
      expect.objectContaining({
        kind: 'template',
        rule: 'invalid-answer',
        scope: { tool: 'llm', host: 'gpt-x', node: 'extract' },
        effect: { temperature: 0, schemaInPrompt: true },
      }),
    ]);
  });

  it('record a model answer that failed its schema as invalid_answer, other validation errors by class', () => {
    expect(outcomeOf({ code: 'validation', message: 'x', invalidAnswer: true })).toBe(INVALID_ANSWER);
    expect(outcomeOf({ code: 'validation', message: 'x' })).toBe('validation');
    expect(outcomeOf(undefined)).toBe('ok');
  });
});

describe('the prefer rule', () => {
  /** A run of `task` whose step `node` called `tool` at `target`, with this outcome. */
  const step = (task: string, node: string, tool: string, target: string, outcome: string): RunSummary => ({
    ...run([]),
    fingerprint: `task:${task}`,
    calls: [{ node, tool, target, ms: 20, outcome }],
  });
  const prefers = (hot: RunSummary[]) => candidateLessons(hot).filter((c) => c.kind === 'prefer');

  it('prefers a tool that succeeds where another fails for the same step of the same task', () => {
    const hot = [
      ...Array.from({ length: 3 }, () => step('quote', 'price', 'json', '-', 'ok')),
      ...Array.from({ length: 3 }, () => step('quote', 'price', 'http', 'b.test', 'validation')),
    ];
    const [lesson, ...rest] = prefers(hot);
    expect(rest).toEqual([]);
    expect(lesson).toMatchObject({
      kind: 'prefer',
      rule: 'prefer',
      scope: { tool: 'json', overTool: 'http', overHost: 'b.test' },
      confidence: 0.9,
    });
    expect(lesson!.statement).toMatch(/^prefer json over http \(b\.test\): /);
    // Both sides are its evidence, newest first.
    expect(lesson!.evidence).toEqual(hot.map((r) => r.runId));
    expect(lessonId('main', 'prefer', lesson!.scope)).not.toBe(
      lessonId('main', 'prefer', { tool: 'json', overTool: 'http', overHost: 'c.test' }),
    );
  });

  it('names a custom tool once (its calls are keyed by its name)', () => {
    const hot = [
      ...Array.from({ length: 3 }, () => step('quote', 'price', 'svc.quotes', 'svc.quotes', 'ok')),
      ...Array.from({ length: 3 }, () => step('quote', 'price', 'http', 'b.test', 'server')),
    ];
    expect(prefers(hot)[0]!.statement).toMatch(/^prefer svc\.quotes over http \(b\.test\): /);
  });

  it('prefers a service of the same tool, and names the services', () => {
    const hot = [
      ...Array.from({ length: 4 }, () => step('quote', 'price', 'http', 'a.test', 'ok')),
      ...Array.from({ length: 3 }, () => step('quote', 'price', 'http', 'b.test', 'server')),
    ];
    expect(prefers(hot)).toEqual([
      expect.objectContaining({
        scope: { tool: 'http', host: 'a.test', overTool: 'http', overHost: 'b.test' },
        statement: expect.stringMatching(/^prefer a\.test over b\.test for http: .*b\.test failed 3 of 3/),
      }),
    ]);
  });

  it('compares only the same step, and needs several runs on each side', () => {
    const works = Array.from({ length: 3 }, () => step('quote', 'price', 'json', '-', 'ok'));
    const fails = (task: string, node: string) =>
      Array.from({ length: 3 }, () => step(task, node, 'http', 'b.test', 'validation'));
    // Another task, or another node of the task: not the same kind of call.
    expect(prefers([...works, ...fails('other', 'price')])).toEqual([]);
    expect(prefers([...works, ...fails('quote', 'report')])).toEqual([]);
    // Two successes are not enough, nor is a side that fails as often.
    expect(prefers([...works.slice(1), ...fails('quote', 'price')])).toEqual([]);
    const flaky = [step('quote', 'price', 'json', '-', 'server'), ...works];
    expect(
      prefers([...flaky, step('quote', 'price', 'json', '-', 'server'), ...fails('quote', 'price')]),
    ).toEqual([]);
  });

  it('keeps one lesson per failing service: the alternative with the most successful runs', () => {
    const hot = [
      ...Array.from({ length: 3 }, () => step('quote', 'price', 'json', '-', 'ok')),
      ...Array.from({ length: 4 }, () => step('quote', 'price', 'wait', '-', 'ok')),
      ...Array.from({ length: 3 }, () => step('quote', 'price', 'http', 'b.test', 'validation')),
    ];
    expect(prefers(hot).map((c) => c.scope)).toEqual([
      { tool: 'wait', overTool: 'http', overHost: 'b.test' },
    ]);
  });
});

describe('the lifecycle', () => {
  const candidate = (runs: string[], confidence = Math.min(0.9, runs.length * 0.2)) => ({
    kind: 'hard' as const,
    rule: 'service-down',
    scope: { tool: 'http', host: 'down.test' },
    statement: 'down',
    evidence: runs,
    confidence,
  });

  /** The lifecycle without probation: for tests about what happens to a lesson once in effect. */
  const AT_ONCE = { ...DEFAULT_LIFECYCLE, probationRuns: 0 };
  const activeLesson = (): Lesson[] =>
    reflectLessons('main', [], [candidate(['a', 'b', 'c'])], NOW, 0, AT_ONCE).lessons;
  const at = (minute: number): string => `2026-11-30T00:${String(minute).padStart(2, '0')}:00.000Z`;
  /** Runs ended at these minutes: a reflection at `now` (a minute) that finds the lesson in `runs`. */
  const reflectingOn =
    (ended: Record<string, number>, version: number) => (lessons: Lesson[], runs: string[], now: number) =>
      reflectLessons(
        'main',
        lessons,
        [candidate(runs)],
        at(now),
        version,
        DEFAULT_LIFECYCLE,
        new Map(),
        new Set(),
        new Map(Object.entries(ended).map(([run, minute]) => [run, at(minute)])),
      );

  it('takes a finding out of probation at 3 cases and confidence 0.6 (without a probation period)', () => {
    const first = reflectLessons('main', [], [candidate(['a', 'b'])], NOW, 0, AT_ONCE);
    expect(first.lessons[0]).toMatchObject({ status: 'probation', cases: 2, confidence: 0.4 });
    expect(first.changed).toBe(false);
    // Three cases, but the finding is still weak: it stays on probation.
    const weak = reflectLessons('main', first.lessons, [candidate(['c', 'b'])], NOW, 0, AT_ONCE);
    expect(weak.lessons[0]).toMatchObject({ status: 'probation', cases: 3, confidence: 0.4 });
    const second = reflectLessons('main', weak.lessons, [candidate(['a', 'b', 'c'])], NOW, 0, AT_ONCE);
    expect(second.lessons[0]).toMatchObject({ status: 'active', cases: 3, confidence: 0.6 });
    expect(second.changed).toBe(true);
    expect(second.lessons[0]!.id).toBe(lessonId('main', 'service-down', { tool: 'http', host: 'down.test' }));
  });

  it('keeps a new finding on probation, without effect, until runs that ended after it was proposed support it', () => {
    // a, b, c failed before the reflection at minute 5 that proposes the lesson; d and e after it.
    const reflectAt = reflectingOn({ a: 1, b: 2, c: 3, d: 6, e: 7 }, 0);
    // Enough support to take effect, but all of it from before the lesson existed.
    const proposed = reflectAt([], ['c', 'b', 'a'], 5);
    expect(proposed.lessons[0]).toMatchObject({
      status: 'probation',
      cases: 3,
      confidence: 0.6,
      createdAt: at(5),
      // The agent's version did not move: the lesson's stays at it, so the next reflection may write it.
      version: 0,
    });
    expect(proposed.changed).toBe(false);
    // Found again on the same runs: still on probation.
    expect(reflectAt(proposed.lessons, ['c', 'b', 'a'], 6).lessons[0]!.status).toBe('probation');
    // One newer run is not enough with the default of two.
    const one = reflectAt(proposed.lessons, ['d', 'c', 'b', 'a'], 7);
    expect(one.lessons[0]).toMatchObject({ status: 'probation', cases: 4, createdAt: at(5) });
    expect(one.changed).toBe(false);
    // Two runs that ended after it was proposed: it takes effect, and the lessons version moves.
    const two = reflectAt(one.lessons, ['e', 'd', 'c', 'b', 'a'], 8);
    expect(two.lessons[0]).toMatchObject({ status: 'active', cases: 5, version: 1 });
    expect(two.changed).toBe(true);
  });

  it('decays a lesson no reflection supports, and retires it below the threshold', () => {
    let lessons = activeLesson();
    expect(lessons[0]!.status).toBe('active');
    const statuses: string[] = [];
    for (let i = 0; i < DEFAULT_LIFECYCLE.decayAfter + 1; i++) {
      lessons = reflectLessons('main', lessons, [], NOW, 1).lessons;
      statuses.push(`${lessons[0]!.status}:${lessons[0]!.confidence}`);
    }
    // Two misses change nothing; from the third, confidence halves; below 0.3 it retires.
    expect(statuses).toEqual(['active:0.6', 'active:0.6', 'active:0.3', 'retired:0.15']);
  });

  it('keeps a lesson that runs used successfully from decaying, though no rule finds it any more', () => {
    let lessons = activeLesson();
    const id = lessons[0]!.id;
    for (let i = 0; i < 5; i++) {
      lessons = reflectLessons(
        'main',
        lessons,
        [],
        NOW,
        1,
        DEFAULT_LIFECYCLE,
        new Map(),
        new Set([id]),
      ).lessons;
    }
    expect(lessons[0]).toMatchObject({ status: 'active', missed: 0, confidence: 0.6 });
  });

  it('keeps a retired lesson retired on the runs that retired it, and brings it back through probation on newer ones', () => {
    // a, b, c failed before the operator retired the lesson at minute 10; d, e, f failed after.
    const reflectAt = reflectingOn({ a: 1, b: 2, c: 3, d: 11, e: 12, f: 13, g: 14, h: 16, i: 17 }, 1);
    const active = activeLesson().map((l) => ({ ...l, createdAt: at(5), updatedAt: at(5) }));
    const retired = active.map((l) => ({ ...l, status: 'retired' as const, updatedAt: at(10) }));
    // The hot set still holds a, b, c: the next reflection finds them again, and changes nothing.
    const still = reflectAt(retired, ['a', 'b', 'c'], 10);
    expect(still.lessons[0]).toMatchObject({ status: 'retired', updatedAt: at(10) });
    expect(still.changed).toBe(false);
    // New failures after the retirement: it starts over on probation, counting only them.
    const back = reflectAt(still.lessons, ['f', 'e', 'd', 'c', 'b', 'a'], 15);
    expect(back.lessons[0]).toMatchObject({
      status: 'probation',
      cases: 3,
      retiredAt: at(10),
      createdAt: at(15),
    });
    expect([...back.lessons[0]!.evidence].sort()).toEqual(['d', 'e', 'f']);
    expect(back.changed).toBe(false);
    // Its probation starts again: g ended before it came back, so it does not count.
    const waiting = reflectAt(back.lessons, ['g', 'f', 'e', 'd', 'c'], 16);
    expect(waiting.lessons[0]).toMatchObject({ status: 'probation', cases: 4 });
    // A later reflection that finds runs after its return supporting it takes it out of probation.
    const again = reflectAt(waiting.lessons, ['i', 'h', 'g', 'f', 'e', 'd', 'c'], 18);
    expect(again.lessons[0]).toMatchObject({ status: 'active', cases: 6 });
    expect(again.changed).toBe(true);
  });

  it('leaves pinned lessons alone and counts negative feedback against the lessons a run applied', () => {
    const active = activeLesson();
    const pinned = active.map((l) => ({ ...l, status: 'pinned' as const }));
    expect(reflectLessons('main', pinned, [], NOW, 1).lessons[0]).toMatchObject({
      status: 'pinned',
      missed: 0,
    });
    const against = new Map([[active[0]!.id, 3]]);
    const after = reflectLessons(
      'main',
      active,
      [candidate(['a', 'b', 'c'])],
      NOW,
      1,
      DEFAULT_LIFECYCLE,
      against,
    );
    expect(after.lessons[0]!.confidence).toBeCloseTo(0.6 * 0.8 ** 3, 3);
    expect(after.lessons[0]!.status).toBe('active');
  });
});
