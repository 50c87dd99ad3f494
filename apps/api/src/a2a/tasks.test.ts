import { describe, expect, it } from 'vitest';
import { Role, TaskState, type Message, type Part } from '@a2a-js/sdk';
import type { RunDocument } from '@tetraloop/core/domain';
import {
  artifactsOf,
  contextIdOf,
  endsWaiting,
  messageText,
  signalPayloadOf,
  taskStateOf,
  taskStatusOf,
} from './tasks.js';

/** The fields of a run document the mapping reads; the rest does not matter to it. */
const run = (fields: Partial<RunDocument>): RunDocument =>
  ({
    runId: '3f1c1a52-4a4e-4d55-9d0a-0c8b8c0a6f01',
    status: 'running',
    createdAt: '2026-01-01T00:00:00.000Z',
    startedAt: '2026-01-01T00:00:01.000Z',
    finishedAt: null,
    agentId: 'main',
    tenant: 'acme',
    sessionKey: 'acme~alice',
    nodes: {},
    graph: null,
    output: null,
    error: null,
    ...fields,
  }) as RunDocument;

const waiting = {
  gate: { status: 'waiting', signal: 'go', until: '2026-01-02T00:00:00.000Z', attempts: [] },
};
const settled = { finishedAt: '2026-01-01T00:00:02.000Z' };

const message = (...parts: Part['content'][]): Message => ({
  messageId: 'm1',
  contextId: '',
  taskId: '',
  role: Role.ROLE_USER,
  parts: parts.map((content) => ({ content, metadata: undefined, filename: '', mediaType: '' })),
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

describe('a run as an A2A task', () => {
  it('maps the run status to the task state; a node waiting for a signal asks for input', () => {
    expect(taskStateOf(run({ status: 'queued', startedAt: null }))).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(taskStateOf(run({}))).toBe(TaskState.TASK_STATE_WORKING);
    expect(taskStateOf(run({ nodes: waiting as never }))).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(taskStateOf(run({ status: 'succeeded', ...settled }))).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(taskStateOf(run({ status: 'timed_out', ...settled }))).toBe(TaskState.TASK_STATE_FAILED);
    expect(taskStateOf(run({ status: 'cancelled', ...settled }))).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it('completes a task only once its run settled (its output is there), but shows a cancel at once', () => {
    expect(taskStateOf(run({ status: 'succeeded' }))).toBe(TaskState.TASK_STATE_WORKING);
    expect(taskStateOf(run({ status: 'cancelled' }))).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it('ends a wait at an end, or at input other than the signal just delivered', () => {
    expect(endsWaiting(run({}))).toBe(false);
    expect(endsWaiting(run({ nodes: waiting as never }))).toBe(true);
    expect(endsWaiting(run({ nodes: waiting as never }), 'go')).toBe(false);
    expect(endsWaiting(run({ status: 'failed', ...settled }), 'go')).toBe(true);
  });

  it('says what input is awaited, and names the context as the client named the session', () => {
    const doc = run({ nodes: waiting as never });
    expect(taskStatusOf(doc).message?.parts[1]?.content).toEqual({
      $case: 'data',
      value: { awaiting: [{ nodeId: 'gate', signal: 'go', until: '2026-01-02T00:00:00.000Z' }] },
    });
    expect(contextIdOf(doc)).toBe('alice');
    expect(contextIdOf(run({ sessionKey: null }))).toBe(doc.runId);
  });

  it('gives a succeeded run’s reply and outputs as artifacts, and nothing before', () => {
    const output = { agent: { text: 'the title is Example' } };
    const artifacts = artifactsOf(run({ status: 'succeeded', output, ...settled }));
    expect(artifacts.map((a) => [a.artifactId, a.parts[0]?.content])).toEqual([
      ['answer', { $case: 'text', value: 'the title is Example' }],
      ['output', { $case: 'data', value: output }],
    ]);
    expect(artifactsOf(run({ status: 'failed', ...settled }))).toEqual([]);
  });
});

describe('an A2A message as a session message', () => {
  it('joins text parts and data parts as JSON; refuses a file part at its index', () => {
    expect(
      messageText(message({ $case: 'text', value: 'look at' }, { $case: 'data', value: { a: 1 } })),
    ).toBe('look at\n\n{"a":1}');
    expect(() =>
      messageText(message({ $case: 'text', value: 'x' }, { $case: 'url', value: 'https://x.test' })),
    ).toThrow(/message\.parts\[1\]/);
    expect(() => messageText(message({ $case: 'text', value: '' }))).toThrow(/message\.parts: holds no text/);
  });

  it('delivers its only data part as the signal’s payload, else its text', () => {
    expect(signalPayloadOf(message({ $case: 'data', value: { approved: true } }))).toEqual({
      approved: true,
    });
    expect(signalPayloadOf(message({ $case: 'text', value: 'yes, go' }))).toEqual({ text: 'yes, go' });
  });
});
