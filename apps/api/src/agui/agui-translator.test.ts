/**
 * The translator's AG-UI events, checked by AG-UI's own code: each against `@ag-ui/core`'s event
 * schema, and every sequence through `@ag-ui/client`'s order validator (`verifyEvents`), the one
 * HttpAgent runs on what a server sends.
 */
import { EventSchema } from '@ag-ui/core/schemas';
import { verifyEvents, type BaseEvent } from '@ag-ui/client';
import { from, lastValueFrom, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '@tetraloop/core/domain';
import { AguiTranslator, parseInterruptId, type RunState } from './agui-translator.js';

const RUN = '0b7c2f4e-9a51-4d4e-8a7e-3f1d2c5b6a70';
const IDS = { threadId: 'thread-1', runId: 'agui-run-1', tetraloopRunId: RUN };
const STATE: RunState = { runId: RUN, status: 'running', nodes: { agent: 'pending' } };

let seq = 0;
const ev = (type: string, nodeId?: string, data?: unknown): RunEvent => ({
  seq: ++seq,
  type,
  ts: 0,
  runId: RUN,
  ...(nodeId ? { nodeId } : {}),
  ...(data !== undefined ? { data } : {}),
});

/** Feeds the events through the translator as the router does (the last one final when it ends the run). */
function translate(events: RunEvent[], translator = new AguiTranslator(IDS, 0)): BaseEvent[] {
  const out: BaseEvent[] = translator.start({ theme: 'dark' }, STATE);
  for (const e of events) out.push(...translator.next(e, e.type === 'run.finished'));
  out.push(...translator.interrupt());
  return out;
}

/** Every event valid by AG-UI's schema, and the sequence in the order AG-UI's client accepts. */
async function expectValid(events: BaseEvent[]): Promise<void> {
  for (const e of events) expect(EventSchema.safeParse(e).success, JSON.stringify(e)).toBe(true);
  await expect(lastValueFrom(from(events).pipe(verifyEvents(), toArray()))).resolves.toHaveLength(
    events.length,
  );
}

const typed = (events: BaseEvent[], type: string): (BaseEvent & Record<string, unknown>)[] =>
  events.filter((e) => (e.type as string) === type);

describe('AguiTranslator', () => {
  it("turns an agent's turns into text deltas, a tool call, its result and the run's end", async () => {
    const out = translate([
      ev('run.started', undefined, { generation: 0 }),
      ev('node.started', 'agent', { status: 'running' }),
      ev('assistant.delta', 'agent', { text: 'Let me ' }),
      ev('assistant.delta', 'agent', { text: 'look.' }),
      ev('tool.start', 'agent', { tool: 'json', callId: 'call_1', args: '{"value":1}' }),
      ev('tool.result', 'agent', { tool: 'json', callId: 'call_1', ok: true }),
      ev('usage', 'agent', { model: 'm', promptTokens: 10, completionTokens: 2 }),
      ev('node.iteration', 'agent', { turn: { toolResults: [{ tool_call_id: 'call_1', content: '1' }] } }),
      ev('assistant.delta', 'agent', { text: 'It is 1.' }),
      ev('usage', 'agent', { model: 'm', promptTokens: 20, completionTokens: 3 }),
      ev('node.succeeded', 'agent', { status: 'succeeded' }),
      ev('run.finished', undefined, { status: 'succeeded', error: null, generation: 0 }),
    ]);
    await expectValid(out);
    expect(typed(out, 'TEXT_MESSAGE_CONTENT').map((e) => e.delta)).toEqual(['Let me ', 'look.', 'It is 1.']);
    const [call] = typed(out, 'TOOL_CALL_START');
    expect(call).toMatchObject({ toolCallId: 'call_1', toolCallName: 'json', parentMessageId: `${RUN}:3` });
    expect(typed(out, 'TOOL_CALL_ARGS')).toMatchObject([{ delta: '{"value":1}' }]);
    expect(typed(out, 'TOOL_CALL_RESULT')).toMatchObject([{ toolCallId: 'call_1', content: '1' }]);
    expect(out[1]).toMatchObject({ snapshot: { theme: 'dark', tetraloop: STATE } });
    expect(out.at(-1)).toMatchObject({
      type: 'RUN_FINISHED',
      threadId: 'thread-1',
      runId: 'agui-run-1',
      usage: [{ model: 'm', inputTokens: 30, outputTokens: 5, totalTokens: 35 }],
    });
  });

  it('ends the AG-UI run with an interrupt for an open approval, closing what is open first', async () => {
    const out = translate([
      ev('node.started', 'agent'),
      ev('assistant.delta', 'agent', { text: 'Checking.' }),
      ev('tool.start', 'agent', { tool: 'http', callId: 'call_9', args: '{}' }),
      ev('assistant.delta', 'agent', { text: 'still open' }),
      ev('signal.awaited', 'agent', {
        signal: 'approve.agent.abc123',
        until: '2030-01-01T00:00:00.000Z',
        approval: { tool: 'http', reason: 'a person approves' },
      }),
    ]);
    await expectValid(out);
    const finished = out.at(-1) as BaseEvent & { outcome: { type: string; interrupts: { id: string }[] } };
    expect(finished.outcome).toMatchObject({
      type: 'interrupt',
      interrupts: [
        {
          reason: 'tool_approval',
          toolCallId: 'call_9',
          expiresAt: '2030-01-01T00:00:00.000Z',
          message: expect.stringContaining('a person approves'),
        },
      ],
    });
    expect(parseInterruptId(finished.outcome.interrupts[0]!.id)).toEqual({
      runId: RUN,
      seq, // the stream's place when it stopped: a resumed stream goes on after it
      signal: 'approve.agent.abc123',
      kind: 'tool_approval',
    });
  });

  it('tells no interrupt for a wait answered before the stream caught up, nor after the run ended', () => {
    const answered = translate([
      ev('node.started', 'gate'),
      ev('signal.awaited', 'gate', { signal: 'go', until: '2030-01-01T00:00:00.000Z' }),
      ev('signal.received', undefined, { name: 'go', payload: null }),
    ]);
    expect(typed(answered, 'RUN_FINISHED')).toEqual([]);
    const translator = new AguiTranslator(IDS, 0);
    translate(
      [
        ev('signal.awaited', 'gate', { signal: 'go' }),
        ev('run.finished', undefined, {
          status: 'timed_out',
          error: { code: 'timeout', message: 'too late' },
        }),
      ],
      translator,
    );
    expect(translator.over).toBe(true);
    expect(translator.interrupt()).toEqual([]);
  });

  it('ends a failed run with RUN_ERROR and a cancelled one with its outcome', async () => {
    const failed = translate([
      ev('node.started', 'agent'),
      ev('run.finished', undefined, {
        status: 'failed',
        error: { code: 'node_failed', message: 'it broke' },
      }),
    ]);
    await expectValid(failed);
    expect(failed.at(-1)).toMatchObject({ type: 'RUN_ERROR', code: 'node_failed', message: 'it broke' });
    const cancelled = translate([ev('run.finished', undefined, { status: 'cancelled', error: null })]);
    await expectValid(cancelled);
    expect(cancelled.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
  });

  it('reopens the steps of nodes still running when a resumed run is followed on', async () => {
    const translator = new AguiTranslator(IDS, 40);
    const out: BaseEvent[] = translator.start(
      {},
      { ...STATE, nodes: { agent: 'waiting', done: 'succeeded' } },
    );
    expect(typed(out, 'STEP_STARTED')).toMatchObject([{ stepName: 'agent' }]);
    out.push(...translator.next(ev('node.succeeded', 'agent'), false));
    out.push(...translator.next(ev('run.finished', undefined, { status: 'succeeded', error: null }), true));
    await expectValid(out);
  });

  it('only ends a stream at the final run.finished (a resumed run has one per generation)', () => {
    const translator = new AguiTranslator(IDS, 0);
    translator.start({}, STATE);
    expect(
      translator.next(ev('run.finished', undefined, { status: 'failed', generation: 0 }), false),
    ).toEqual([]);
    expect(translator.over).toBe(false);
  });
});
