import { describe, expect, it } from 'vitest';
import { encodeCursor } from './index-cursor.js';
import {
  decodeRunCursor,
  listingOf,
  matchesSearch,
  parseTimeBound,
  searchFilters,
  type ListingFields,
} from './run-search.js';

const RUN = '4c5403be-886b-4587-863f-2605f1e6eae1';
const NOW = Date.parse('2026-11-30T06:00:00.000Z');

describe('cursors', () => {
  it('round-trip, opaque and URL-safe', () => {
    const text = encodeCursor({ score: 1_796_012_448_028, id: RUN });
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(text).not.toContain(RUN);
    expect(decodeRunCursor(text)).toEqual({ score: 1_796_012_448_028, id: RUN });
  });

  it('refuse what this API did not hand out', () => {
    for (const text of [
      '',
      'not a cursor',
      Buffer.from(`12:${RUN}x`).toString('base64url'),
      Buffer.from(`-1:${RUN}`).toString('base64url'),
      Buffer.from(`99999999999999999:${RUN}`).toString('base64url'),
      Buffer.from(`12:../../etc`).toString('base64url'),
      Buffer.from(`12:${RUN.toUpperCase()}`).toString('base64url'),
      'A'.repeat(401),
    ]) {
      expect(decodeRunCursor(text), text).toBeUndefined();
    }
  });
});

describe('time bounds', () => {
  it('read durations before now', () => {
    expect(parseTimeBound('90s', NOW)).toBe(NOW - 90_000);
    expect(parseTimeBound('15m', NOW)).toBe(NOW - 900_000);
    expect(parseTimeBound('1h', NOW)).toBe(NOW - 3_600_000);
    expect(parseTimeBound('7d', NOW)).toBe(NOW - 7 * 86_400_000);
  });

  it('read ISO times with a zone', () => {
    expect(parseTimeBound('2026-11-30T05:00:00Z', NOW)).toBe(Date.parse('2026-11-30T05:00:00Z'));
    expect(parseTimeBound('2026-11-30T07:00:00.250+02:00', NOW)).toBe(Date.parse('2026-11-30T05:00:00.250Z'));
  });

  it('refuse anything else', () => {
    for (const text of [
      '',
      '1',
      '1w',
      '-1h',
      'yesterday',
      '2026-11-30',
      '2026-11-30T05:00:00',
      '2026-13-45T99:00:00Z',
    ])
      expect(parseTimeBound(text, NOW), text).toBeUndefined();
  });
});

describe('filters', () => {
  const fields = { status: 'failed', agentId: 'scout', sessionKey: 'acme~alice', tags: '["nightly","x"]' };

  it('list the filters that have an index', () => {
    expect(searchFilters({ limit: 5 })).toEqual([]);
    expect(searchFilters({ limit: 5, status: 'failed', tag: 'x', since: 1 })).toEqual([
      { kind: 'status', value: 'failed' },
      { kind: 'tag', value: 'x' },
    ]);
  });

  it('pass a run only when every filter holds', () => {
    expect(matchesSearch({ limit: 5 }, fields)).toBe(true);
    expect(
      matchesSearch(
        { limit: 5, status: 'failed', agentId: 'scout', sessionKey: 'acme~alice', tag: 'x' },
        fields,
      ),
    ).toBe(true);
    expect(matchesSearch({ limit: 5, status: 'succeeded' }, fields)).toBe(false);
    expect(matchesSearch({ limit: 5, agentId: 'main' }, fields)).toBe(false);
    expect(matchesSearch({ limit: 5, sessionKey: 'alice' }, fields)).toBe(false);
    expect(matchesSearch({ limit: 5, tag: 'weekly' }, fields)).toBe(false);
    expect(matchesSearch({ limit: 5, tag: 'x' }, { ...fields, tags: null })).toBe(false);
  });

  it('pass no run whose hash is gone', () => {
    expect(matchesSearch({ limit: 5 }, { status: null, agentId: null, sessionKey: null, tags: null })).toBe(
      false,
    );
  });
});

describe('listings', () => {
  const fields: ListingFields = {
    status: 'succeeded',
    agentId: 'scout',
    sessionKey: null,
    task: 'x'.repeat(500),
    createdAt: '2026-11-30T05:00:00.000Z',
    startedAt: '2026-11-30T05:00:01.000Z',
    finishedAt: '2026-11-30T05:00:03.500Z',
    nodeCount: '4',
    tags: '["nightly"]',
    rerunOf: JSON.stringify({ runId: RUN, from: 'b' }),
    scheduleId: 'nightly-report',
    counters: {
      'count:succeeded': '3',
      'count:failed': '1',
      'usage:toolCalls': '4',
      'usage:toolTimeMs': '120',
      'usage:promptTokens': '10',
      'usage:completionTokens': '5',
      'usage:modelCalls': '1',
      'usage:costNanoUsd': '1500',
    },
  };

  it('hold what a list shows of a run, its task cut to 200 characters', () => {
    expect(listingOf(RUN, fields)).toEqual({
      runId: RUN,
      status: 'succeeded',
      agentId: 'scout',
      sessionKey: null,
      task: 'x'.repeat(200),
      createdAt: fields.createdAt,
      startedAt: fields.startedAt,
      finishedAt: fields.finishedAt,
      durationMs: 2500,
      nodes: { total: 4, succeeded: 3, failed: 1 },
      usage: {
        toolCalls: 4,
        toolTimeMs: 120,
        promptTokens: 10,
        completionTokens: 5,
        totalTokens: 15,
        modelCalls: 1,
        costUsd: 0.0000015,
        unpricedModelCalls: 0,
      },
      tags: ['nightly'],
      rerunOf: { runId: RUN, from: 'b' },
      scheduleId: 'nightly-report',
      triggerId: null,
    });
  });

  it('time a run that never started from its creation, and an unsettled one not at all', () => {
    expect(listingOf(RUN, { ...fields, startedAt: null })?.durationMs).toBe(3500);
    expect(listingOf(RUN, { ...fields, finishedAt: null })?.durationMs).toBeNull();
  });

  it('default what a run made before the counts lacks', () => {
    const listing = listingOf(RUN, { ...fields, nodeCount: null, tags: null, rerunOf: null, counters: {} });
    expect(listing).toMatchObject({ nodes: { total: 0, succeeded: 0, failed: 0 }, tags: [], rerunOf: null });
  });

  it('is null for a run whose hash is gone', () => {
    expect(listingOf(RUN, { ...fields, status: null })).toBeNull();
  });
});
