/**
 * Task TTLs in task runs, against a scripted OpenAI-compatible planner through the real `openai`
 * SDK: the planner may set a node's TTL (its schema and rule say how; a TTL policy that cannot apply
 * is sent back for repair at its field), and a planned node that expires unstarted is handed back to
 * the planner with what expired — a replan of the remaining work, or the next window — within the
 * run's replans.
 *
 * One tool slot: a node waiting in the queue behind a gated node (`/gate`, held open until the test
 * saw both the gated call and the waiting node queued) is taken only after the gated one ends, past
 * its 1 ms TTL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatRequest, ModelServer } from './support/model-server.js';
import { startPlannerStack, type PlannerStack } from './support/planner-stack.js';
import { postRun, readEvents, runToEnd, untilNodeStatus, waitFor, type Stack } from './support/stack.js';
import type { ToolServer } from './support/tool-server.js';

let planned: PlannerStack;
let stack: Stack;
let model: ModelServer;
let server: ToolServer;

beforeAll(async () => {
  // Planner calls: structured output named "graph" (task runs) or "window" (window mode).
  planned = await startPlannerStack({
    schemas: ['graph', 'window'],
    env: { TETRALOOP_TOOL_CONCURRENCY: '1', TETRALOOP_PLAN_WINDOW: '3', TETRALOOP_PLAN_MAX_WINDOWS: '4' },
  });
  ({ stack, model, server } = planned);
});
afterAll(() => planned?.close());

const userOf = (r: ChatRequest): string => r.messages.find((m) => m.role === 'user')!.content!;

/** Holds the only tool slot until the test opens its gate. */
const hold = (id: string) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/gate?node=${id}` },
  priority: 10,
});
/** Ready beside `hold`, so it waits in the queue past its TTL. */
const late = (id: string, extra: object = {}) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/work?node=${id}&ms=1` },
  priority: 1,
  ttlMs: 1,
  ...extra,
});
const json = (id: string, value: unknown) => ({ id, kind: 'tool', tool: 'json', args: { value } });

/** Posts the run, lets the held node go once the late one waits beside it, and waits for the end. */
async function runPastExpiry(body: object, held: string, waiting: string) {
  const posted = await postRun(stack.url, body);
  expect(posted.status, JSON.stringify(posted.body)).toBe(202);
  const runId = posted.body.runId as string;
  await server.hitCount(held, 1);
  await untilNodeStatus(stack, runId, waiting, 'queued');
  server.openGate(held);
  return waitFor(stack.url, runId);
}

/** The `node.expired` events of a run: node id and when it expired. */
async function expiries(runId: string): Promise<[string, string][]> {
  const events = await readEvents(stack.url, runId);
  return events
    .filter((e) => e.data.type === 'node.expired')
    .map((e) => [e.data.nodeId!, (e.data.data as { expiredAt: string }).expiredAt]);
}

describe('a planned node that expires unstarted', () => {
  it('is handed back to the planner, which replans the remaining work told what expired', async () => {
    const before = model.requests.length;
    planned.plan(
      {
        nodes: [hold('r-hold'), late('r-late'), json('r-after', { got: { $ref: 'r-late.output' } })],
        edges: [['r-late', 'r-after']],
      },
      {
        nodes: [
          hold('r-hold'),
          json('r-late', 'in time'),
          json('r-after', { got: { $ref: 'r-late.output' } }),
        ],
        edges: [['r-late', 'r-after']],
      },
    );
    const doc = await runPastExpiry({ task: 'hold, then something late' }, 'r-hold', 'r-late');
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(doc.replans).toBe(1);
    expect(doc.output).toMatchObject({ 'r-after': { got: 'in time' } });
    // The expired call was never made; the held node's result was kept, not run again.
    expect(server.hitsOf('r-late')).toHaveLength(0);
    expect(server.hitsOf('r-hold')).toHaveLength(1);

    const [[node, expiredAt]] = (await expiries(doc.runId)) as [[string, string]];
    expect(node).toBe('r-late');
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    // The planner was offered the TTL fields and told how to use them.
    expect(JSON.stringify(calls[0]!.response_format)).toContain('"ttlMs"');
    expect(calls[0]!.messages[0]!.content).toContain('"onExpire"');
    expect(doc.planning).toMatchObject({ promptVersion: 'planner-v5', planVersion: 1 });
    // The replan names the node, what it was and when it expired.
    const replan = userOf(calls[1]!);
    expect(replan).toContain(
      `The previous plan stopped: timeout: node "r-late" was not started before it expired at ${expiredAt}`,
    );
    expect(replan).toContain('These nodes did not run: they were not started before they expired.');
    expect(replan).toMatch(/- r-late: \{[^\n]*"ttlMs":1[^\n]*\}, not started before it expired at /);
    expect(replan).toContain(`r-late&ms=1"}`);
    expect(replan).toContain(`not started before it expired at ${expiredAt} (onExpire "skip")`);
    // Its dependent did not run on the expired output: it ran once, in the new plan.
    const events = await readEvents(stack.url, doc.runId);
    const afterStarts = events.filter((e) => e.data.type === 'node.started' && e.data.nodeId === 'r-after');
    expect(afterStarts).toHaveLength(1);
  });

  it('with onExpire "fail", replans rather than failing the run', async () => {
    const before = model.requests.length;
    planned.plan(
      { nodes: [hold('f-hold'), late('f-late', { onExpire: 'fail' })], edges: [] },
      { nodes: [hold('f-hold'), json('f-late', 'in time')], edges: [] },
    );
    const doc = await runPastExpiry(
      { task: 'hold, and a late step that must not be late' },
      'f-hold',
      'f-late',
    );
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(doc.replans).toBe(1);
    expect(doc.output).toMatchObject({ 'f-late': 'in time' });
    expect(userOf(planned.plannerRequests(before)[1]!)).toContain('(onExpire "fail")');
  });

  it('with onExpire "downgrade", runs the fallback the planner gave, handing nothing back', async () => {
    const before = model.requests.length;
    planned.plan({
      nodes: [
        hold('d-hold'),
        late('d-late', {
          onExpire: 'downgrade',
          fallback: { kind: 'tool', tool: 'json', args: { value: 'cached answer' } },
        }),
      ],
      edges: [],
    });
    const doc = await runPastExpiry({ task: 'fresh if possible, cached if late' }, 'd-hold', 'd-late');
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(doc.replans).toBe(0);
    expect(doc.nodes['d-late']).toMatchObject({
      status: 'succeeded',
      output: 'cached answer',
      expired: { onExpire: 'downgrade' },
    });
    expect(server.hitsOf('d-late')).toHaveLength(0);
    expect(planned.plannerRequests(before)).toHaveLength(1);
  });

  it('once the run has no replans left, is skipped as in a fixed graph', async () => {
    const before = model.requests.length;
    planned.plan({
      nodes: [hold('n-hold'), late('n-late'), json('n-after', { got: { $ref: 'n-late.output' } })],
      edges: [['n-late', 'n-after']],
    });
    const doc = await runPastExpiry({ task: 'no second chances', maxReplans: 0 }, 'n-hold', 'n-late');
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(doc.replans).toBe(0);
    expect(doc.nodes['n-late']).toMatchObject({ status: 'skipped', expired: { onExpire: 'skip' } });
    expect(doc.output).toMatchObject({ 'n-after': { got: { expired: true } } });
    expect(planned.plannerRequests(before)).toHaveLength(1);
  });

  it('in window mode, goes into the next window with what expired', async () => {
    const before = model.requests.length;
    planned.plan(
      { nodes: [hold('w-hold'), late('w-late')], edges: [], goalReached: false },
      {
        nodes: [json('w-again', { from: '{{w-hold.output.body.node}}' })],
        edges: [['w-hold', 'w-again']],
        goalReached: true,
      },
    );
    const doc = await runPastExpiry({ task: 'windows past an expiry', mode: 'window' }, 'w-hold', 'w-late');
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(doc.output).toEqual({ 'w-again': { from: 'w-hold' } });
    expect(server.hitsOf('w-late')).toHaveLength(0);
    const [[, expiredAt]] = (await expiries(doc.runId)) as [[string, string]];
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    expect(JSON.stringify(calls[0]!.response_format)).toContain('"expiresAt"');
    expect(doc.planning).toMatchObject({ promptVersion: 'planner-window-v4' });
    const second = userOf(calls[1]!);
    expect(second).toContain(
      `Why you are asked again: timeout: node "w-late" was not started before it expired at ${expiredAt}`,
    );
    expect(second).toContain('Completed nodes you may depend on: w-hold (http)');
    expect(second).toContain(`- w-late: {"priority":1,"onError":"replan","ttlMs":1,"kind":"tool"`);
    expect(second).toContain(`not started before it expired at ${expiredAt} (onExpire "skip")`);
    // Handed back, not failed: it is not among the nodes that did not complete.
    expect(second).not.toContain('Nodes of the last window that did not complete');
  });
});

describe('a TTL the planner sets', () => {
  it('is checked like a fixed graph’s: a policy that cannot apply is sent back at its field, then rejected', async () => {
    const before = model.requests.length;
    planned.plan({
      nodes: [
        late('b-down', { onExpire: 'downgrade' }),
        late('b-both', { expiresAt: '2026-12-01T00:00:00Z' }),
        late('b-tool', { onExpire: 'downgrade', fallback: { kind: 'tool', tool: 'nope', args: {} } }),
      ],
      edges: [],
    });
    const doc = await runToEnd(stack.url, { task: 'expiring badly' });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'plan_rejected' });
    expect((doc.error!.issues ?? []).map((i) => i.path).sort()).toEqual([
      'nodes.0.fallback',
      'nodes.1.expiresAt',
      'nodes.2.fallback.tool',
    ]);
    // One repair was asked for, naming each field.
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    const repair = calls[1]!.messages.at(-1)!.content!;
    expect(repair).toContain('- nodes.0.fallback: onExpire "downgrade" needs a fallback');
    expect(repair).toContain('- nodes.1.expiresAt: give ttlMs or expiresAt, not both');
  });
});
