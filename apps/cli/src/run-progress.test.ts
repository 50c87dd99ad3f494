import { describe, expect, it } from 'vitest';
import { RunProgress, type NodeProgress, type StreamedRunEvent } from './run-progress.js';
import { formatMs, textTable } from './text-table.js';

const T = 1_796_012_448_000;
const RUN = '4c5403be-886b-4587-863f-2605f1e6eae1';
const ev = (type: string, ms: number, nodeId?: string, data?: unknown): StreamedRunEvent => ({
  type,
  ts: T + ms,
  ...(nodeId ? { nodeId } : {}),
  ...(data === undefined ? {} : { data }),
});

describe('RunProgress', () => {
  it('shows what a custom tool says of its progress while its node runs', () => {
    const p = new RunProgress(RUN);
    p.apply(ev('node.started', 0, 'crm', { status: 'running', attempt: 1 }));
    const node = p.apply(ev('node.progress', 40, 'crm', { fraction: 0.5, message: 'customer found' }));
    expect(node).toMatchObject({ progress: { fraction: 0.5, message: 'customer found' } });
    expect(p.line(node as NodeProgress, T + 100)).toMatch(
      /^ {2}▶ crm +running 50% +100ms {2}customer found$/,
    );
    expect(
      p.apply(ev('node.progress', 41, 'crm', { fraction: 0.5, message: 'customer found' })),
    ).toBeUndefined();
    const done = p.apply(ev('node.succeeded', 90, 'crm', { status: 'succeeded' }));
    expect(done).toMatchObject({ status: 'succeeded' });
    expect(done).not.toHaveProperty('progress');
  });

  it('follows each node through its events, with its elapsed time', () => {
    const p = new RunProgress(RUN);
    p.seed({ a: { status: 'pending' }, b: { status: 'pending' } });
    expect(p.apply(ev('run.started', 0))).toBe('run');
    expect(p.apply(ev('node.queued', 1, 'a'))).toMatchObject({ id: 'a', status: 'queued' });
    expect(
      p.apply(
        ev('node.started', 2, 'a', {
          status: 'running',
          startedAt: new Date(T + 2).toISOString(),
          attempt: 1,
        }),
      ),
    ).toMatchObject({ status: 'running' });
    expect(p.apply(ev('node.retrying', 50, 'a', { attempt: 1, retryDelayMs: 100 }))).toMatchObject({
      status: 'retrying',
      attempt: 2,
    });
    expect(p.line({ id: 'a', status: 'retrying', attempt: 2, startedAt: T + 2 }, T + 102)).toMatch(
      /^ {2}↻ a +retrying \(attempt 2\) +100ms$/,
    );
    expect(p.apply(ev('node.started', 150, 'a', { status: 'running', attempt: 2 }))).toMatchObject({
      status: 'running',
    });
    expect(p.apply(ev('node.succeeded', 1202, 'a', { status: 'succeeded' }))).toMatchObject({
      status: 'succeeded',
    });
    expect(p.apply(ev('node.reused', 3, 'b', { status: 'succeeded', from: 'x' }))).toMatchObject({
      reused: true,
    });
    expect(p.apply(ev('run.finished', 1300, undefined, { status: 'succeeded' }))).toBe('run');
    expect(p.render(T + 5000)).toEqual([
      `run ${RUN}  succeeded  1.3s`,
      '  ✓ a     succeeded             1.2s',
      '  ✓ b     succeeded (reused)',
    ]);
  });

  it('reports nothing for an event that changes nothing shown', () => {
    const p = new RunProgress(RUN);
    p.apply(ev('node.queued', 1, 'a'));
    expect(p.apply(ev('node.queued', 2, 'a'))).toBeUndefined();
    expect(p.apply(ev('usage', 3, 'a', {}))).toBeUndefined();
    expect(p.apply(ev('assistant.delta', 3, 'a', { text: 'hi' }))).toBeUndefined();
  });

  it('keeps a long view within its lines: what is left to watch, and counts of the rest', () => {
    const p = new RunProgress(RUN);
    for (let i = 0; i < 50; i++) p.apply(ev('node.succeeded', i, `n${i}`));
    p.apply(ev('node.started', 60, 'slow', { attempt: 1 }));
    p.apply(ev('node.failed', 61, 'bad'));
    const lines = p.render(T + 100, 10);
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/▶ slow +running/);
    expect(lines[2]).toMatch(/✗ bad +failed/);
    expect(lines[3]).toBe('  … 50 more: 50 succeeded');
  });
});

describe('text', () => {
  it('formats durations a person reads', () => {
    expect([
      formatMs(null),
      formatMs(0),
      formatMs(999.6),
      formatMs(1234),
      formatMs(125_000),
      formatMs(3_720_000),
    ]).toEqual(['-', '0ms', '1.0s', '1.2s', '2m05s', '1h02m']);
  });

  it('aligns table columns', () => {
    expect(
      textTable(
        ['A', 'LONGER'],
        [
          ['xyz', '1'],
          ['x', '22'],
        ],
      ),
    ).toBe('A    LONGER\nxyz  1\nx    22\n');
  });
});
