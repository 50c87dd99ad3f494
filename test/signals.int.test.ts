/**
 * Signals through the API on a real Redis: accepted only while something waits for them (or a wait
 * node declares them with acceptEarly), never after the run ended; who decided is recorded; each
 * run's signals are capped in number and size. Approvals of held tool calls are in hooks.int.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument, WaitRecord } from '@tetraloop/core/domain';
import {
  post,
  postRun,
  readEvents,
  startStack,
  untilNodeStatus,
  waitFor,
  type Stack,
} from './support/stack.js';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    env: { TETRALOOP_SIGNALS_MAX_PER_RUN: '2', TETRALOOP_SIGNAL_MAX_BYTES: '1024' },
  });
});
afterAll(async () => {
  await stack?.close();
});

const start = async (nodes: unknown[], edges: unknown[] = []): Promise<string> => {
  const posted = await postRun(stack.url, { graph: { nodes, edges } });
  expect(posted.status).toBe(202);
  return posted.body.runId as string;
};
const signal = (runId: string, name: string, body: unknown = {}) =>
  post(stack.url, `/v1/runs/${runId}/signals/${name}`, body);
const document = async (runId: string): Promise<RunDocument> =>
  (await fetch(`${stack.url}/v1/runs/${runId}`).then((r) => r.json())) as RunDocument;
const gate = { id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 60 };
const after = { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'gate.output' } } };
const before = { id: 'before', kind: 'wait', signal: 'first', timeoutSeconds: 60 };

describe('signals', () => {
  it('are refused with 409 while nothing waits for them, and accepted once the node waits', async () => {
    // `gate` runs only after `before`: a signal for it now would be pre-posted.
    const runId = await start(
      [before, gate, after],
      [
        ['before', 'gate'],
        ['gate', 'after'],
      ],
    );
    await untilNodeStatus(stack, runId, 'before', 'waiting');
    const early = await signal(runId, 'go', { by: 'mallory' });
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({ error: { code: 'signal_not_awaited' } });

    expect((await signal(runId, 'first')).status).toBe(202);
    await untilNodeStatus(stack, runId, 'gate', 'waiting');
    expect((await document(runId)).nodes.gate).toMatchObject({ status: 'waiting', signal: 'go' });
    const sent = await signal(runId, 'go', { by: 'ana' });
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({
      delivered: true,
      decidedBy: { keyId: null, tenant: 'default' },
    });
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toMatchObject({ after: { by: 'ana' } });

    // Who decided: on the node's wait record and in the signal event.
    const waits = (doc.nodes.gate as { waits?: WaitRecord[] }).waits;
    expect(waits).toEqual([
      expect.objectContaining({
        signal: 'go',
        decidedBy: expect.objectContaining({ keyId: null, tenant: 'default' }),
      }),
    ]);
    const events = (await readEvents(stack.url, runId)).map((e) => e.data);
    expect(
      events.find((e) => e.type === 'signal.received' && (e.data as { name: string }).name === 'go'),
    ).toMatchObject({
      data: { name: 'go', payload: { by: 'ana' }, decidedBy: { keyId: null, tenant: 'default' } },
    });
    expect(events.find((e) => e.type === 'signal.awaited' && e.nodeId === 'gate')).toMatchObject({
      data: { signal: 'go' },
    });

    const late = await signal(runId, 'go', { by: 'bob' });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ error: { code: 'run_finished' } });
  });

  it('are accepted before the node waits when it declares acceptEarly', async () => {
    const runId = await start(
      [before, { ...gate, acceptEarly: true }, after],
      [
        ['before', 'gate'],
        ['gate', 'after'],
      ],
    );
    await untilNodeStatus(stack, runId, 'before', 'waiting');
    const early = await signal(runId, 'go', { early: true });
    expect(early.status).toBe(202);
    expect((await signal(runId, 'go', { again: true })).body).toMatchObject({ delivered: false });
    expect((await signal(runId, 'first')).status).toBe(202);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toMatchObject({ after: { early: true } });
    expect((doc.nodes.gate as { waits?: WaitRecord[] }).waits).toEqual([
      expect.objectContaining({ signal: 'go', decidedBy: expect.objectContaining({ tenant: 'default' }) }),
    ]);
  });

  it('are capped in size (413) and in number per run (429)', async () => {
    const names = ['a', 'b', 'c'];
    const runId = await start(
      names.map((n) => ({ id: n, kind: 'wait', signal: n, timeoutSeconds: 60, acceptEarly: true })),
    );
    const large = await signal(runId, 'a', { blob: 'x'.repeat(2000) });
    expect(large.status).toBe(413);
    expect(large.body).toMatchObject({ error: { code: 'signal_too_large' } });
    expect((await signal(runId, 'a')).status).toBe(202);
    expect((await signal(runId, 'b')).status).toBe(202);
    const third = await signal(runId, 'c');
    expect(third.status).toBe(429);
    expect(third.body).toMatchObject({ error: { code: 'too_many_signals' } });
    expect((await post(stack.url, `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await waitFor(stack.url, runId)).status).toBe('cancelled');
  });

  it('answer 404 for an unknown run and 400 for a bad name', async () => {
    expect((await signal('4c5403be-886b-4587-863f-2605f1e6eae1', 'go')).status).toBe(404);
    expect((await signal('4c5403be-886b-4587-863f-2605f1e6eae1', 'no%20spaces')).status).toBe(400);
  });
});
