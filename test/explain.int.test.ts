/**
 * `GET /v1/runs/:id/explain` on the real stack, checked against the run document it explains: on a
 * graph with known delays the critical path is the slow branch and the achieved parallelism is above
 * 1; every node's duration, start, end, attempts, retry backoff and tokens are its snapshot's; and a
 * run of another tenant is not found.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeSnapshot, RunDocument } from '@tetraloop/core/domain';
import type { RunExplain } from '@tetraloop/core/insight';
import { startModelServer, type ModelServer } from './support/model-server.js';
import { startStack, runToEnd, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let tools: ToolServer;
let model: ModelServer;

beforeAll(async () => {
  tools = await startToolServer();
  model = await startModelServer({
    script: () => ({ content: 'short', usage: { promptTokens: 40, completionTokens: 2 } }),
  });
  stack = await startStack({
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_BACKOFF_BASE_MS: '500',
      TETRALOOP_BACKOFF_JITTER: '0',
    },
  });
});

afterAll(async () => {
  await stack?.close();
  await tools?.close();
  await model?.close();
});

async function explain(runId: string): Promise<RunExplain> {
  const res = await fetch(`${stack.url}/v1/runs/${runId}/explain`);
  expect(res.status).toBe(200);
  return (await res.json()) as RunExplain;
}

const wait = (id: string, ms: number) => ({ id, kind: 'tool', tool: 'wait', args: { ms } });
const ms = (iso: string | null | undefined): number => Date.parse(iso!);

describe('explain', () => {
  let doc: RunDocument;
  let explained: RunExplain;

  beforeAll(async () => {
    // a → (slow 2,500 ms, fast 100 ms, flaky: one 503, then a retry after 500 ms) → join → summary.
    // The slow branch is five times the flaky one's backoff, so a loaded machine stretching the
    // flaky branch's calls cannot make it the longer one.
    doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          wait('a', 50),
          wait('slow', 2500),
          wait('fast', 100),
          {
            id: 'flaky',
            kind: 'tool',
            tool: 'http',
            args: { url: `${tools.url}/flaky?node=flaky&fail=1&status=503` },
          },
          wait('join', 50),
          { id: 'summary', kind: 'llm', prompt: 'Say it is done.' },
        ],
        edges: [
          ['a', 'slow'],
          ['a', 'fast'],
          ['a', 'flaky'],
          ['slow', 'join'],
          ['fast', 'join'],
          ['flaky', 'join'],
          ['join', 'summary'],
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    explained = await explain(doc.runId);
  });

  it('finds the slow branch as the critical path and a parallelism above 1', () => {
    expect(explained.criticalPath.map((n) => n.id)).toEqual(['a', 'slow', 'join', 'summary']);
    expect(explained.nodes.filter((n) => n.critical).map((n) => n.id)).toEqual([
      'a',
      'slow',
      'join',
      'summary',
    ]);
    expect(explained.criticalPath[1]!.durationMs).toBeGreaterThanOrEqual(2500);
    expect(explained.parallelism).toBeGreaterThan(1);
    expect(explained.wallOverCriticalPath).toBeGreaterThanOrEqual(1);
  });

  it('agrees with the node snapshots, node by node', () => {
    for (const node of explained.nodes) {
      const snapshot = doc.nodes[node.id] as NodeSnapshot;
      const span = ms(snapshot.finishedAt) - ms(snapshot.startedAt);
      expect(node, node.id).toMatchObject({
        status: snapshot.status,
        startedAt: snapshot.startedAt,
        finishedAt: snapshot.finishedAt,
        durationMs: span,
        attempts: snapshot.attempts.length,
        tokens: snapshot.usage?.totalTokens ?? 0,
        reused: false,
      });
      expect(node.queueWaitMs, node.id).toBe(Math.max(0, ms(snapshot.startedAt) - ms(node.readyAt)));
      expect(node.executionMs + node.retryWaitMs + node.throttledMs + node.parkedMs, node.id).toBe(span);
    }
    const flaky = doc.nodes.flaky as NodeSnapshot;
    const backoff = ms(flaky.attempts[1]!.startedAt) - ms(flaky.attempts[0]!.finishedAt);
    expect(explained.nodes.find((n) => n.id === 'flaky')).toMatchObject({
      attempts: 2,
      retryWaitMs: backoff,
    });
    expect(backoff).toBeGreaterThanOrEqual(flaky.attempts[0]!.retryDelayMs! - 50);
    expect(explained.nodes.find((n) => n.id === 'summary')?.tokens).toBe(42);
  });

  it('adds the nodes up into the run’s totals and ratios', () => {
    const sum = (pick: (n: RunExplain['nodes'][number]) => number): number =>
      explained.nodes.reduce((total, n) => total + pick(n), 0);
    expect(explained.wallMs).toBe(ms(doc.finishedAt) - ms(doc.startedAt));
    expect(explained.nodeTimeMs).toBe(sum((n) => n.durationMs));
    expect(explained.criticalPathMs).toBe(explained.criticalPath.reduce((t, n) => t + n.durationMs, 0));
    expect(explained.parallelism).toBeCloseTo(explained.nodeTimeMs / explained.wallMs, 2);
    expect(explained.wallOverCriticalPath).toBeCloseTo(explained.wallMs / explained.criticalPathMs, 2);
    expect(explained.totals).toEqual({
      queueWaitMs: sum((n) => n.queueWaitMs),
      executionMs: sum((n) => n.executionMs),
      retryWaitMs: sum((n) => n.retryWaitMs),
      throttledMs: sum((n) => n.throttledMs),
      parkedMs: sum((n) => n.parkedMs),
      tokens: doc.usage.totalTokens,
    });
  });

  it('times readiness from the node.queued events: after the dependencies ended', () => {
    const join = explained.nodes.find((n) => n.id === 'join')!;
    const slowEnd = ms((doc.nodes.slow as NodeSnapshot).finishedAt);
    // The event's time is Redis's clock, the snapshot's the worker's: the same host here.
    expect(ms(join.readyAt)).toBeGreaterThanOrEqual(slowEnd - 5);
    expect(ms(join.readyAt)).toBeLessThanOrEqual(ms(join.startedAt));
  });

  it('answers 404 for an unknown run', async () => {
    const res = await fetch(`${stack.url}/v1/runs/4c5403be-886b-4587-863f-2605f1e6eae1/explain`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { code: 'run_not_found' } });
  });
});
