import { describe, expect, it } from 'vitest';
import type { AttemptRecord, NodeView, RunDocument, RunEvent } from '../domain/run-model.js';
import { criticalPath, explainRun, readyTimes, type ExplainInput } from './explain.js';

const T0 = Date.parse('2026-11-30T05:00:00.000Z');
const at = (ms: number): string => new Date(T0 + ms).toISOString();

const attempt = (n: number, from: number, to: number, extra: Partial<AttemptRecord> = {}): AttemptRecord => ({
  attempt: n,
  startedAt: at(from),
  finishedAt: at(to),
  durationMs: to - from,
  worker: 'w',
  ...extra,
});

/** A node that succeeded after one attempt from `from` to `to` (ms after T0). */
const done = (id: string, from: number, to: number, extra: Partial<NodeView> = {}): NodeView => ({
  id,
  status: 'succeeded',
  output: null,
  attempts: [attempt(1, from, to)],
  startedAt: at(from),
  finishedAt: at(to),
  durationMs: to - from,
  ...extra,
});

const doc = (
  nodes: NodeView[],
  run: Partial<Pick<RunDocument, 'status' | 'startedAt' | 'finishedAt'>> = {},
): ExplainInput['document'] => ({
  runId: 'r',
  status: 'succeeded',
  startedAt: at(0),
  finishedAt: at(760),
  ...run,
  nodes: Object.fromEntries(nodes.map((n) => [n.id, n])),
});

const queued = (nodeId: string, ms: number): RunEvent => ({
  seq: 0,
  type: 'node.queued',
  ts: T0 + ms,
  runId: 'r',
  nodeId,
});

/** a → (slow, fast) → join: the slow branch takes 590 ms, the fast one 90 ms. */
const diamond = {
  ids: ['a', 'slow', 'fast', 'join'],
  edges: [
    ['a', 'slow'],
    ['a', 'fast'],
    ['slow', 'join'],
    ['fast', 'join'],
  ] as [string, string][],
};

describe('explainRun', () => {
  const input: ExplainInput = {
    document: doc([
      done('a', 2, 100),
      done('slow', 110, 700),
      done('fast', 104, 194),
      done('join', 705, 750),
    ]),
    plan: diamond,
    readyAt: readyTimes([queued('a', 1), queued('slow', 100), queued('fast', 100), queued('join', 700)]),
    now: T0 + 10_000,
  };

  it('finds the slow branch as the critical path, with each node’s duration', () => {
    const explain = explainRun(input);
    expect(explain.criticalPath).toEqual([
      { id: 'a', durationMs: 98 },
      { id: 'slow', durationMs: 590 },
      { id: 'join', durationMs: 45 },
    ]);
    expect(explain.criticalPathMs).toBe(733);
    expect(explain.nodes.filter((n) => n.critical).map((n) => n.id)).toEqual(['a', 'slow', 'join']);
  });

  it('divides node time by wall time (parallelism) and wall time by the critical path', () => {
    const explain = explainRun(input);
    expect(explain.wallMs).toBe(760);
    expect(explain.nodeTimeMs).toBe(98 + 590 + 90 + 45);
    expect(explain.parallelism).toBe(Math.round((823 / 760) * 1000) / 1000);
    expect(explain.parallelism).toBeGreaterThan(1);
    expect(explain.wallOverCriticalPath).toBe(Math.round((760 / 733) * 1000) / 1000);
  });

  it('times each node’s queue wait from when it became ready to its first start', () => {
    const byId = new Map(explainRun(input).nodes.map((n) => [n.id, n]));
    expect(byId.get('a')).toMatchObject({ readyAt: at(1), startedAt: at(2), queueWaitMs: 1 });
    expect(byId.get('slow')).toMatchObject({ readyAt: at(100), queueWaitMs: 10, executionMs: 590 });
    expect(byId.get('fast')).toMatchObject({ queueWaitMs: 4, durationMs: 90 });
    expect(byId.get('join')).toMatchObject({ queueWaitMs: 5, finishedAt: at(750) });
    expect(explainRun(input).totals.queueWaitMs).toBe(1 + 10 + 4 + 5);
  });

  it('falls back to dependencies’ ends (and the run’s start for sources) without queued events', () => {
    const byId = new Map(explainRun({ ...input, readyAt: new Map() }).nodes.map((n) => [n.id, n]));
    expect(byId.get('a')).toMatchObject({ readyAt: at(0), queueWaitMs: 2 });
    expect(byId.get('slow')).toMatchObject({ readyAt: at(100), queueWaitMs: 10 });
    expect(byId.get('join')).toMatchObject({ readyAt: at(700), queueWaitMs: 5 });
  });

  it('splits a span into retry backoff, throttled, parked and execution time', () => {
    const retried = done('a', 0, 400, {
      attempts: [
        attempt(1, 0, 20, { error: { code: 'server', message: 'HTTP 503' }, retryDelayMs: 100 }),
        attempt(2, 130, 400),
      ],
      throttledMs: 50,
    });
    const waited = done('w', 400, 1400, {
      attempts: [attempt(1, 400, 1400)],
      waits: [
        {
          signal: 'go',
          since: at(410),
          until: at(100_000),
          generation: 0,
          decidedBy: { keyId: null, tenant: 'default', at: at(1310) },
        },
      ],
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0, modelCalls: 0 },
    });
    const explain = explainRun({
      document: doc([retried, waited], { finishedAt: at(1400) }),
      plan: { ids: ['a', 'w'], edges: [['a', 'w']] },
      readyAt: new Map(),
      now: T0 + 2000,
    });
    const [a, w] = explain.nodes;
    expect(a).toMatchObject({
      durationMs: 400,
      retryWaitMs: 110,
      throttledMs: 50,
      parkedMs: 0,
      executionMs: 240,
      attempts: 2,
    });
    expect(w).toMatchObject({ durationMs: 1000, parkedMs: 900, executionMs: 100 });
    expect(explain.totals).toMatchObject({ retryWaitMs: 110, throttledMs: 50, parkedMs: 900 });
  });

  it('counts tokens per node and in all', () => {
    const usage = (totalTokens: number) => ({
      promptTokens: totalTokens - 1,
      completionTokens: 1,
      totalTokens,
      modelCalls: 1,
    });
    const explain = explainRun({
      ...input,
      document: doc([
        done('a', 2, 100, { usage: usage(120) }),
        done('slow', 110, 700, { usage: usage(30) }),
        done('fast', 104, 194),
        done('join', 705, 750),
      ]),
    });
    expect(explain.nodes.map((n) => n.tokens)).toEqual([120, 30, 0, 0]);
    expect(explain.totals.tokens).toBe(150);
  });

  it('counts nothing of a rerun’s reused nodes: they ran in another run', () => {
    const explain = explainRun({
      ...input,
      document: doc(
        [
          done('a', -5000, -4000, { reusedFrom: 'origin' }),
          done('slow', -4000, -3000, { reusedFrom: 'origin' }),
          done('fast', 10, 100),
          done('join', 110, 150),
        ],
        { finishedAt: at(160) },
      ),
      readyAt: new Map([
        ['fast', T0 + 5],
        ['join', T0 + 100],
      ]),
    });
    expect(explain.nodes.slice(0, 2)).toEqual([
      expect.objectContaining({
        id: 'a',
        reused: true,
        durationMs: 0,
        attempts: 0,
        startedAt: null,
        readyAt: null,
      }),
      expect.objectContaining({ id: 'slow', reused: true, durationMs: 0 }),
    ]);
    expect(explain.criticalPath.map((n) => n.id)).toEqual(['fast', 'join']);
    expect(explain.nodeTimeMs).toBe(130);
  });

  it('runs what still runs up to now, and a queued node’s wait too', () => {
    const running = {
      id: 'slow',
      status: 'running',
      startedAt: at(120),
      attempt: 1,
      attempts: [],
    } as NodeView;
    const waitingForSlow = { id: 'join', status: 'pending', attempts: [] } as NodeView;
    const explain = explainRun({
      document: doc(
        [done('a', 2, 100), running, { id: 'fast', status: 'queued', attempts: [] }, waitingForSlow],
        {
          status: 'running',
          finishedAt: null,
        },
      ),
      plan: diamond,
      readyAt: new Map([
        ['a', T0 + 1],
        ['slow', T0 + 100],
        ['fast', T0 + 100],
      ]),
      now: T0 + 500,
    });
    const byId = new Map(explain.nodes.map((n) => [n.id, n]));
    expect(explain.wallMs).toBe(500);
    expect(byId.get('slow')).toMatchObject({ durationMs: 380, finishedAt: null, queueWaitMs: 20 });
    expect(byId.get('fast')).toMatchObject({ durationMs: 0, queueWaitMs: 400 });
    expect(byId.get('join')).toMatchObject({ durationMs: 0, queueWaitMs: 0, readyAt: null });
    expect(explain.criticalPath.map((n) => n.id)).toEqual(['a', 'slow']);
  });

  it('sets a map node’s wall time against its items’ longest lane, leaving out items of an earlier execution', () => {
    const item = (from: number, to: number) => ({ startedAt: at(from), finishedAt: at(to) });
    const explain = explainRun({
      // The map's snapshot starts at the entry that found its items settled (390); it started them at 100.
      document: doc([done('fan', 390, 400), done('after', 400, 420)]),
      plan: { ids: ['fan', 'after'], edges: [['fan', 'after']] },
      readyAt: new Map(),
      now: T0 + 1000,
      maps: new Map([
        [
          'fan',
          {
            concurrency: 2,
            startedAt: T0 + 100,
            // Lane 0: items 0, 2 (100 + 60 ms); lane 1: items 1, 3 (120 + 80 ms). Item 4 succeeded
            // in an earlier execution (before the map's span) and did not run in this one.
            items: [item(110, 210), item(110, 230), item(215, 275), item(235, 315), item(10, 20)],
          },
        ],
      ]),
    });
    const fan = explain.nodes.find((n) => n.id === 'fan')!;
    expect(fan).toMatchObject({ durationMs: 300, startedAt: at(100), queueWaitMs: 100 });
    expect(fan.map).toEqual({
      total: 5,
      concurrency: 2,
      ran: 4,
      itemTimeMs: 360,
      longestItemMs: 120,
      itemsCriticalPathMs: 200,
      criticalLane: 1,
      wallOverItemsCriticalPath: 1.5,
    });
    expect(explain.nodes.find((n) => n.id === 'after')!.map).toBeUndefined();
  });

  it('has no ratios for a run that never started', () => {
    const explain = explainRun({
      document: doc([{ id: 'a', status: 'skipped', attempts: [], finishedAt: at(0), durationMs: 0 }], {
        status: 'cancelled',
        startedAt: null,
      }),
      plan: { ids: ['a'], edges: [] },
      readyAt: new Map(),
      now: T0,
    });
    expect(explain).toMatchObject({
      wallMs: 0,
      parallelism: null,
      wallOverCriticalPath: null,
      criticalPath: [],
    });
  });
});

describe('criticalPath', () => {
  const parents = new Map<string, string[]>([
    ['a', []],
    ['b', ['a']],
    ['c', ['a']],
    ['d', ['b', 'c']],
  ]);
  const ids = ['a', 'b', 'c', 'd'];

  it('follows the heaviest chain', () => {
    const weight = new Map([
      ['a', 1],
      ['b', 5],
      ['c', 9],
      ['d', 1],
    ]);
    expect(criticalPath(ids, parents, weight)).toEqual(['a', 'c', 'd']);
  });

  it('takes the first of equal chains, in plan order', () => {
    const weight = new Map(ids.map((id) => [id, 1]));
    expect(criticalPath(ids, parents, weight)).toEqual(['a', 'b', 'd']);
  });

  it('is empty when nothing took time, and drops a weightless head', () => {
    expect(criticalPath(ids, parents, new Map())).toEqual([]);
    expect(criticalPath(ids, parents, new Map([['c', 3]]))).toEqual(['c']);
  });

  it('takes parents listed in any order, whatever the order of ids', () => {
    const weight = new Map([
      ['a', 1],
      ['b', 2],
      ['c', 3],
      ['d', 4],
    ]);
    expect(criticalPath(['d', 'c', 'b', 'a'], parents, weight)).toEqual(['a', 'c', 'd']);
  });
});
