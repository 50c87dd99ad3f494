import { describe, expect, it } from 'vitest';
import type { StreamEvent } from '@tetraloop/client';
import { progressShown, progressText, takeProgress, type ProgressReports } from './node-progress.js';

let seq = 0;
const event = (type: string, nodeId: string | undefined, data?: unknown): StreamEvent => ({
  seq: ++seq,
  type,
  ts: 0,
  runId: 'r',
  ...(nodeId === undefined ? {} : { nodeId }),
  ...(data === undefined ? {} : { data }),
});
const progress = (nodeId: string, fraction: unknown, message?: string, attempt = 1): StreamEvent =>
  event('node.progress', nodeId, { fraction, ...(message === undefined ? {} : { message }), attempt });

describe('takeProgress', () => {
  it('keeps the latest report of each node', () => {
    const reports: ProgressReports = new Map();
    expect(takeProgress(reports, event('node.started', 'a', { attempt: 1 }))).toBe(false);
    expect(takeProgress(reports, progress('a', 0.2, 'looking up'))).toBe(true);
    expect(takeProgress(reports, progress('a', 0.5, 'customer found'))).toBe(true);
    expect(takeProgress(reports, progress('b', 1))).toBe(true);
    expect(reports.get('a')).toEqual({ fraction: 0.5, message: 'customer found', attempt: 1 });
    expect(reports.get('b')).toEqual({ fraction: 1, attempt: 1 });
  });

  it('forgets a node’s report when it starts another attempt or ends, not on its other events', () => {
    const reports: ProgressReports = new Map();
    takeProgress(reports, progress('a', 0.5));
    expect(takeProgress(reports, event('node.iteration', 'a', {}))).toBe(false);
    expect(takeProgress(reports, event('node.retrying', 'a', { attempt: 1 }))).toBe(false);
    expect(reports.has('a')).toBe(true);
    expect(takeProgress(reports, event('node.started', 'a', { attempt: 2 }))).toBe(true);
    expect(reports.has('a')).toBe(false);
    for (const end of ['node.succeeded', 'node.failed', 'node.skipped', 'node.cancelled', 'node.reused']) {
      takeProgress(reports, progress('a', 0.5, undefined, 2));
      expect(takeProgress(reports, event(end, 'a'))).toBe(true);
      expect(reports.has('a')).toBe(false);
    }
  });

  it('ignores events of no node and reports it cannot read', () => {
    const reports: ProgressReports = new Map();
    const truncated: StreamEvent = {
      type: 'events.truncated',
      family: 'lifecycle',
      phase: 'update',
      runId: 'r',
      data: { after: 1, next: 5 },
    };
    expect(takeProgress(reports, truncated)).toBe(false);
    expect(takeProgress(reports, event('run.started', undefined))).toBe(false);
    expect(takeProgress(reports, progress('a', 'half'))).toBe(false);
    expect(takeProgress(reports, progress('a', Number.NaN))).toBe(false);
    expect(takeProgress(reports, event('node.progress', 'a'))).toBe(false);
    expect(reports.size).toBe(0);
  });
});

describe('progressShown', () => {
  const report = { fraction: 0.5, message: 'customer found', attempt: 2 };

  it('shows a running node’s report of its current attempt', () => {
    expect(progressShown(report, { status: 'running', attempt: 2 })).toBe(report);
    expect(progressShown(report, { status: 'running' })).toBe(report);
    expect(progressShown(report, { status: 'running', attempt: 3 })).toBeUndefined();
  });

  it('shows a retrying node’s last report, and none once the node is anything else', () => {
    expect(progressShown(report, { status: 'retrying', attempt: 2 })).toBe(report);
    for (const status of ['pending', 'queued', 'throttled', 'waiting', 'succeeded', 'failed', 'cancelled'])
      expect(progressShown(report, { status, attempt: 2 })).toBeUndefined();
    expect(progressShown(undefined, { status: 'running' })).toBeUndefined();
    expect(progressShown(report, undefined)).toBeUndefined();
  });
});

describe('progressText', () => {
  it('is a whole percentage and the message', () => {
    expect(progressText({ fraction: 0.5, message: 'customer found' })).toBe('50% — customer found');
    expect(progressText({ fraction: 0.999 })).toBe('99%');
    expect(progressText({ fraction: 1 })).toBe('100%');
  });
});
