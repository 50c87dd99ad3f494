/** The memory scripts, called through MemoryStore against a real Redis: what each writes and answers. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Lesson, RunSummary } from '@tetraloop/core/memory';
import { MemoryStore, memoryKeys } from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const memory = new MemoryStore(redis, { prefix, hotRuns: 3, useBonus: 0.05 });
const T = '2026-11-30T00:00:00.000Z';

afterAll(async () => {
  await redis.quit();
});

const summary = (agentId: string, status: string, outcome = 'ok', lessons: string[] = []): RunSummary => ({
  runId: randomUUID(),
  agentId,
  fingerprint: 'graph:x',
  status,
  finishedAt: T,
  durationMs: 5,
  tokens: 0,
  calls: [{ node: 'n', tool: 'http', target: 'h.test', ms: 40, outcome }],
  lessons,
});
const lesson = (agentId: string, id: string, status: Lesson['status'] = 'active'): Lesson => ({
  id,
  agentId,
  kind: 'template',
  rule: 'slow-service',
  scope: { tool: 'http', host: 'h.test' },
  statement: 'slow',
  cases: 3,
  confidence: 0.6,
  status,
  evidence: ['a'],
  effect: { timeoutMs: 900 },
  missed: 0,
  createdAt: T,
  updatedAt: T,
  version: 1,
});

describe('record-run', () => {
  it('keeps the hot set at its cap, counts calls by service, and answers the trigger counters', async () => {
    const agent = `a-${randomUUID()}`;
    const results = [];
    for (const status of ['failed', 'failed', 'succeeded', 'failed']) {
      results.push(await memory.record(summary(agent, status, status === 'failed' ? 'server' : 'ok')));
    }
    expect(results).toEqual([
      { sinceReflection: 1, failStreak: 1, worstService: 1 },
      { sinceReflection: 2, failStreak: 2, worstService: 2 },
      { sinceReflection: 3, failStreak: 0, worstService: 0 },
      { sinceReflection: 4, failStreak: 1, worstService: 3 },
    ]);
    expect((await memory.hotSet(agent)).map((r) => r.status)).toEqual(['failed', 'succeeded', 'failed']);
    expect(await memory.stats(agent)).toEqual([
      { tool: 'http', target: 'h.test', calls: 4, failures: { server: 3 }, p50Ms: 50, p95Ms: 50 },
    ]);
    expect(await memory.agents()).toContain(agent);
  });

  it('gives a lesson a run used successfully more confidence and counts the use', async () => {
    const agent = `a-${randomUUID()}`;
    const id = `${agent}.aaaaaaaaaaaa`;
    await memory.saveReflection(agent, [lesson(agent, id)], true, T);
    await memory.record(summary(agent, 'succeeded', 'ok', [id]));
    await memory.record(summary(agent, 'failed', 'server', [id]));
    expect((await memory.lesson(agent, id))?.confidence).toBeCloseTo(0.65);
    expect((await memory.sinceReflection(agent)).used).toEqual(new Set([id]));
    // The version moved only with the reflection that made the lesson.
    expect((await memory.lessons(agent)).version).toBe(1);
  });
});

describe('save-reflection', () => {
  it('writes every lesson, moves the version only when something in effect changed, and resets the counters', async () => {
    const agent = `a-${randomUUID()}`;
    await memory.record(summary(agent, 'failed', 'server'));
    await memory.feedbackAgainst(agent, [`${agent}.bbbbbbbbbbbb`]);
    expect(
      await memory.saveReflection(agent, [lesson(agent, `${agent}.bbbbbbbbbbbb`, 'probation')], false, T),
    ).toBe(0);
    expect(await memory.saveReflection(agent, [lesson(agent, `${agent}.bbbbbbbbbbbb`)], true, T)).toBe(1);
    const meta = await redis.hgetall(memoryKeys(prefix, agent).meta);
    expect(Object.keys(meta).filter((f) => /^(fails|against|used):/.test(f))).toEqual([]);
    expect(meta).toMatchObject({ sinceReflect: '0', lastReflectAt: T, reflections: '2', version: '1' });
    expect((await memory.lessons(agent)).lessons.map((l) => l.status)).toEqual(['active']);
  });
});

describe('save-reflection and a change made meanwhile', () => {
  it('keeps a lesson an override or a probe changed after the reflection read it', async () => {
    const agent = `a-${randomUUID()}`;
    const id = `${agent}.dddddddddddd`;
    const read = await memory.saveReflection(agent, [lesson(agent, id)], true, T);
    // A probe retires the lesson while the next reflection works from what it read.
    await memory.setStatus(agent, id, 'retired', 'meanwhile');
    await memory.saveReflection(agent, [{ ...lesson(agent, id), missed: 1 }], false, T, read);
    expect(await memory.lesson(agent, id)).toMatchObject({ status: 'retired', updatedAt: 'meanwhile' });
  });
});

describe('set-lesson-status', () => {
  it('sets a status and moves the version; an unknown lesson is null and changes nothing', async () => {
    const agent = `a-${randomUUID()}`;
    const id = `${agent}.cccccccccccc`;
    await memory.saveReflection(agent, [lesson(agent, id)], true, T);
    const retired = await memory.setStatus(agent, id, 'retired', 'later');
    expect(retired).toMatchObject({ id, status: 'retired', updatedAt: 'later', version: 2 });
    expect((await memory.lessons(agent)).version).toBe(2);
    expect(await memory.setStatus(agent, `${agent}.000000000000`, 'retired', 'later')).toBeNull();
    expect((await memory.lessons(agent)).version).toBe(2);
  });

  it('lets one probe through per interval', async () => {
    const agent = `a-${randomUUID()}`;
    expect(await memory.claimProbe(agent, 'l', 60_000)).toBe(true);
    expect(await memory.claimProbe(agent, 'l', 60_000)).toBe(false);
    expect(await memory.claimProbe(agent, 'other', 60_000)).toBe(true);
  });
});
