import { describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/client';
import { definitionOf, recordedInput } from './node-input.js';

const attempt = { attempt: 1, startedAt: '', finishedAt: '', durationMs: 1, worker: 'w' };

describe('definitionOf', () => {
  it('finds a node of the plan, nested ones under their parent', () => {
    const doc = {
      graph: {
        nodes: [
          { id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } },
          { id: 'p', kind: 'graph', graph: { nodes: [{ id: 'q', kind: 'tool', tool: 'http' }] } },
        ],
      },
    } as unknown as RunDocument;
    expect(definitionOf(doc, 'a')).toMatchObject({ kind: 'tool', tool: 'json' });
    expect(definitionOf(doc, 'p/q')).toMatchObject({ id: 'q', tool: 'http' });
    expect(definitionOf(doc, 'missing')).toBeUndefined();
  });
});

describe('recordedInput', () => {
  it('is the input the snapshot recorded, as it is (secret references and blob stubs included)', () => {
    const input = { url: 'https://x.test/page', headers: { Authorization: { $secret: 'TOKEN' } } };
    expect(recordedInput({ status: 'succeeded', input, attempts: [attempt] })).toEqual({
      recorded: true,
      value: input,
    });
    const stub = { $blob: 'sha256:ab', bytes: 4096 };
    expect(recordedInput({ status: 'failed', input: stub, attempts: [attempt] })).toEqual({
      recorded: true,
      value: stub,
    });
  });

  it('says why there is none: not finished, never ran, or nothing recorded', () => {
    for (const status of ['pending', 'queued', 'running', 'retrying', 'waiting', 'throttled']) {
      expect(recordedInput({ status, attempts: [attempt] })).toMatchObject({
        recorded: false,
        why: expect.stringMatching(/^Not recorded yet/),
      });
    }
    expect(recordedInput(undefined)).toMatchObject({ recorded: false });
    expect(recordedInput({ status: 'skipped', attempts: [] })).toEqual({
      recorded: false,
      why: 'Not recorded: the node did not run.',
    });
    expect(recordedInput({ status: 'succeeded', attempts: [attempt] })).toMatchObject({
      recorded: false,
      why: expect.stringContaining('before Tetraloop recorded inputs'),
    });
  });
});
