/**
 * A tokens-per-interval limit holds across three `tetraloop worker --pool tool` processes: every
 * model call reserves its prompt plus its completion allowance before it is made, and settles to
 * what it used; the sum of tokens the model server saw inside any interval stays within the limit.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startModelServer, type ModelServer } from '../support/model-server.js';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { runToEnd, startStack, type Stack } from '../support/stack.js';

const INTERVAL_MS = 2000;
const TOKENS_PER_INTERVAL = 1000;
const USED = { promptTokens: 60, completionTokens: 40 };
const CALLS = 24;

let stack: Stack;
let model: ModelServer;
const arrivals: number[] = [];
const workers: Spawned[] = [];

beforeAll(async () => {
  model = await startModelServer({
    script: () => {
      arrivals.push(Date.now());
      return { content: 'ok', usage: USED, latencyMs: 50 };
    },
  });
  const env = {
    OPENAI_BASE_URL: model.url,
    TETRALOOP_MODEL_MAX_RETRIES: '0',
    TETRALOOP_LIMITS: JSON.stringify([
      { name: 'tpm', key: 'model', rate: { tokens: TOKENS_PER_INTERVAL, intervalMs: INTERVAL_MS } },
    ]),
    // Each call reserves its prompt (a few dozen tokens) plus 200: about 4 fit at once unsettled.
    TETRALOOP_FLOW_COMPLETION_TOKENS: '200',
    TETRALOOP_FLOW_RECHECK_MS: '1000',
  };
  // The API and the plan pool here; the tool pool only in three worker processes.
  stack = await startStack({ pools: ['plan'], env });
  for (let i = 0; i < 3; i++)
    workers.push(spawnTetraloop(['worker', '--pool', 'tool', '--concurrency', '8'], stack.env));
  await Promise.all(workers.map((w) => stderrMatches(w, /worker ready/)));
}, 60_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await stack?.close();
  await model?.close();
});

it('keeps the tokens used inside any interval within the limit, across three worker processes', async () => {
  const nodes = Array.from({ length: CALLS }, (_, i) => ({
    id: `m${i}`,
    kind: 'llm',
    prompt: `say ok ${i}`,
  }));
  const doc = await runToEnd(stack.url, { graph: { nodes, edges: [] } });
  expect(doc.status).toBe('succeeded');
  expect(arrivals).toHaveLength(CALLS);
  // Every window of one interval (less 50 ms for the gap between reserving and arriving) holds at
  // most the limit's worth of used tokens.
  const perCall = USED.promptTokens + USED.completionTokens;
  const sorted = [...arrivals].sort((a, b) => a - b);
  let most = 0;
  for (const t of sorted) {
    const inWindow = sorted.filter((u) => u >= t && u < t + INTERVAL_MS - 50).length;
    most = Math.max(most, inWindow * perCall);
  }
  expect(most).toBeLessThanOrEqual(TOKENS_PER_INTERVAL);
  // The limit bound: 2,400 tokens at 1,000 per interval need more than two intervals, so calls waited.
  expect(sorted.at(-1)! - sorted[0]!).toBeGreaterThan(INTERVAL_MS);
  expect(Object.values(doc.nodes).filter((n) => (n.throttledMs ?? 0) > 0).length).toBeGreaterThan(0);
  // All three processes made calls.
  const byWorker = new Set(Object.values(doc.nodes).map((n) => n.attempts.at(-1)?.worker));
  expect(byWorker.size).toBe(3);
}, 60_000);
