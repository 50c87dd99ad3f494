/**
 * How long an approval and a budget decision are waited for, on a real Redis with the real API and
 * workers: `TETRALOOP_APPROVAL_TIMEOUT_SECONDS` and `TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS` set
 * days here, where an hour was fixed before. Checked in the record, not by waiting: the wait record's
 * `until`, the waiting node's, and the timestamp the node's job sleeps to in BullMQ's delayed set.
 * Either wait still ends at the run's deadline when that comes first.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunDocument, WaitRecord } from '@tetraloop/core/domain';
import { loadPlugins } from '@tetraloop/core/hooks';
import { nodeJobId } from '@tetraloop/core/queues';
import { runKeys } from '@tetraloop/core/state';
import { startModelServer, type ModelServer } from './support/model-server.js';
import {
  followJobEvents,
  post,
  postRun,
  startStack,
  untilEvent,
  waitFor,
  type Stack,
} from './support/stack.js';

let stack: Stack;
let model: ModelServer;
let redis: Redis;
const HOUR = 3600;
const DAY = 86_400;
const APPROVAL = 3 * DAY;
const DECISION = 2 * DAY;

beforeAll(async () => {
  const registry = await loadPlugins([], {});
  registry.on('before_tool_call', ({ nodeId }) =>
    nodeId === 'gated' ? { requireApproval: 'a person must approve' } : undefined,
  );
  // Each model call reports 10,000 prompt tokens of gpt-4o-mini: $0.0015, past a $0.0001 budget.
  model = await startModelServer({
    script: () => ({ content: 'ok', usage: { promptTokens: 10_000, completionTokens: 1 } }),
  });
  stack = await startStack({
    hooks: { registry },
    env: {
      TETRALOOP_APPROVAL_TIMEOUT_SECONDS: String(APPROVAL),
      TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS: String(DECISION),
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL: 'gpt-4o-mini',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_WORKSPACE_DIR: mkdtempSync(join(tmpdir(), 'tetraloop-decisions-')),
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
});
afterAll(async () => {
  redis?.disconnect();
  await stack?.close();
  await model?.close();
});

const gated = { id: 'gated', kind: 'tool', tool: 'json', args: { value: 1 } };

/**
 * Submits a run and answers it once `parked` has seen its node's job go to BullMQ's delayed set,
 * with when that job is due out of it: its score there is the timestamp times 0x1000 plus a counter
 * (BullMQ's getDelayedScore.lua).
 */
async function parkedRun(
  body: object,
  nodeId: string,
): Promise<{ runId: string; submittedAt: number; parkedAt: number; dueAt: number }> {
  const jobs = await followJobEvents(stack, ['tool']);
  try {
    const submittedAt = Date.now();
    const posted = await postRun(stack.url, body);
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    const jobId = nodeJobId(runId, nodeId);
    await jobs.next((e) => e.jobId === jobId && e.event === 'delayed', Date.now() + 20_000, 'delayed');
    const parkedAt = Date.now();
    const score = await redis.zscore(`${stack.prefix}:tool:delayed`, jobId);
    expect(score, 'the node job is in the delayed set').not.toBeNull();
    return { runId, submittedAt, parkedAt, dueAt: Math.floor(Number(score) / 0x1000) };
  } finally {
    jobs.close();
  }
}

async function waitingNode(runId: string, nodeId: string): Promise<{ until: number; waits: WaitRecord[] }> {
  const doc = (await (await fetch(`${stack.url}/v1/runs/${runId}`)).json()) as RunDocument;
  const node = doc.nodes[nodeId] as { status: string; until?: string; waits?: WaitRecord[] };
  expect(node.status).toBe('waiting');
  return { until: Date.parse(node.until!), waits: node.waits ?? [] };
}

it('an approval waits TETRALOOP_APPROVAL_TIMEOUT_SECONDS, days past the hour it once had', async () => {
  const parked = await parkedRun({ timeoutSeconds: 10 * DAY, graph: { nodes: [gated] } }, 'gated');
  const { runId } = parked;
  const { until, waits } = await waitingNode(runId, 'gated');
  // The wait's deadline: three days from when the call was held, far past one hour.
  expect(until).toBeGreaterThanOrEqual(parked.submittedAt + APPROVAL * 1000);
  expect(until).toBeLessThanOrEqual(parked.parkedAt + APPROVAL * 1000);
  expect(until - parked.parkedAt).toBeGreaterThan(HOUR * 1000);
  expect(waits).toEqual([
    expect.objectContaining({ until: new Date(until).toISOString(), approval: expect.anything() }),
  ]);
  // The job sleeps to that deadline, holding no worker; nothing wakes it before but the approval.
  expect(parked.dueAt).toBe(until);

  const signal = waits[0]!.signal;
  expect((await post(stack.url, `/v1/runs/${runId}/signals/${signal}`, { approved: true })).status).toBe(202);
  expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
});

it("an approval never waits past the run's deadline", async () => {
  const { runId, dueAt } = await parkedRun({ timeoutSeconds: 2 * HOUR, graph: { nodes: [gated] } }, 'gated');
  const deadlineAt = Number(await redis.hget(runKeys(stack.prefix, runId).meta, 'deadlineAt'));
  expect((await waitingNode(runId, 'gated')).until).toBe(deadlineAt);
  expect(dueAt).toBe(deadlineAt);
  expect((await post(stack.url, `/v1/runs/${runId}/cancel`, {})).status).toBe(202);
});

it('a budget decision waits TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS', async () => {
  const parked = await parkedRun(
    {
      timeoutSeconds: 10 * DAY,
      budget: { costUsd: 0.0001 },
      onBudget: 'pause',
      graph: {
        nodes: [
          { id: 'first', kind: 'llm', prompt: 'one' },
          { id: 'second', kind: 'llm', prompt: 'two' },
        ],
        edges: [['first', 'second']],
      },
    },
    'second',
  );
  const { runId } = parked;
  const paused = await untilEvent(stack.url, runId, (e) => e.data.type === 'budget.paused', {
    what: 'budget.paused',
  });
  const until = Date.parse((paused.data.data as { until: string }).until);
  expect(until).toBeGreaterThanOrEqual(parked.submittedAt + DECISION * 1000);
  expect(until).toBeLessThanOrEqual(parked.parkedAt + DECISION * 1000);
  expect(parked.dueAt).toBe(until);
  expect((await post(stack.url, `/v1/runs/${runId}/cancel`, {})).status).toBe(202);
  expect((await waitFor(stack.url, runId)).status).toBe('cancelled');
});
