/**
 * Each agent's memory in Redis: the hot set of its latest run summaries, counters per service
 * (calls, failures by class, latency buckets), its lessons and their version, and the counters
 * the reflection triggers read. Multi-step changes are scripts over the agent's keys (one hash tag).
 * Every structure is bounded: the hot set by its cap, counters by services × fixed fields, lessons
 * by rules × services.
 */
import type { RedisClient } from './redis-client.js';
import { z } from 'zod';
import { LATENCY_BUCKETS_MS, bucketOf, quantile } from '../memory/latency.js';
import { Lesson, type LessonStatus } from '../memory/lesson.js';
import { RunSummary } from '../memory/run-summary.js';
import { memoryAgentsKey, memoryKeyList, memoryKeys, probeKey } from './keys.js';
import { loadScripts, type ScriptName, type ScriptRunner } from './scripts.js';
import { slotMulti } from './slot-multi.js';

export interface MemoryStoreOptions {
  readonly prefix: string;
  /** Run summaries kept per agent. @defaultValue 200 */
  readonly hotRuns: number;
  /** Confidence a lesson gains each time a run that applied it succeeds. @defaultValue 0.05 */
  readonly useBonus: number;
  /**
   * An agent's memory (hot set, counters, lessons) nobody writes to for this long expires; every
   * write restarts it. @defaultValue 2592000 (30 days)
   */
  readonly idleTtlSeconds?: number;
}

/** What the reflection triggers read after a run is recorded. */
export interface RecordedRun {
  readonly sinceReflection: number;
  readonly failStreak: number;
  /** The most failures of one service since the last reflection. */
  readonly worstService: number;
}

/** A service's counters as reported: calls, failures by class, latency percentiles (bucket bounds). */
export const ServiceStats = z.object({
  tool: z.string(),
  target: z.string(),
  calls: z.number().int().nonnegative(),
  failures: z.record(z.string(), z.number().int().nonnegative()),
  /** Absent until a call was timed. */
  p50Ms: z.number().nonnegative().optional(),
  p95Ms: z.number().nonnegative().optional(),
});
export type ServiceStats = z.infer<typeof ServiceStats>;

/** Where an agent stands with reflection: runs recorded since the last one, and when that was. */
export const ReflectionState = z.object({
  sinceReflection: z.number().int().nonnegative(),
  lastReflectAt: z.string().nullable(),
});
export type ReflectionState = z.infer<typeof ReflectionState>;

export class MemoryStore {
  private readonly runner: ScriptRunner;
  private readonly idleTtlMs: number;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: MemoryStoreOptions,
  ) {
    this.runner = loadScripts(redis);
    this.idleTtlMs = (options.idleTtlSeconds ?? 30 * 86_400) * 1000;
  }

  /** Runs a memory script with the idle TTL appended (see memory.lib.lua). */
  private script(name: ScriptName, keys: string[], args: readonly (string | number)[]): Promise<unknown> {
    return this.runner(name, keys, [...args, this.idleTtlMs]);
  }

  private keys(agentId: string): string[] {
    return memoryKeyList(memoryKeys(this.options.prefix, agentId));
  }

  /** Records a settled run's summary; answers what the reflection triggers need. */
  async record(summary: RunSummary): Promise<RecordedRun> {
    const counters: Record<string, number> = {};
    const add = (field: string): void => {
      counters[field] = (counters[field] ?? 0) + 1;
    };
    const failing: string[] = [];
    for (const call of summary.calls) {
      const service = `${call.tool}|${call.target}`;
      add(`${service}|calls`);
      add(`${service}|lat:${bucketOf(call.ms)}`);
      if (call.outcome !== 'ok') add(`${service}|fail:${call.outcome}`);
      // A call a hard lesson refused never reached the service: no trigger counts it.
      if (call.outcome !== 'ok' && call.outcome !== 'blocked_by_lesson') failing.push(service);
    }
    const [since, streak, worst] = (await this.script('record-run-4', this.keys(summary.agentId), [
      JSON.stringify(summary),
      this.options.hotRuns,
      summary.status === 'succeeded' ? '1' : '0',
      JSON.stringify(summary.lessons),
      this.options.useBonus,
      JSON.stringify(counters),
      JSON.stringify(failing),
    ])) as [number, number, number];
    await this.redis.sadd(memoryAgentsKey(this.options.prefix), summary.agentId);
    return { sinceReflection: since, failStreak: streak, worstService: worst };
  }

  /** The agent's latest run summaries, newest first. */
  async hotSet(agentId: string, limit = this.options.hotRuns): Promise<RunSummary[]> {
    const raw = await this.redis.lrange(memoryKeys(this.options.prefix, agentId).runs, 0, limit - 1);
    return raw.map((r) => RunSummary.parse(JSON.parse(r)));
  }

  async stats(agentId: string): Promise<ServiceStats[]> {
    const raw = await this.redis.hgetall(memoryKeys(this.options.prefix, agentId).stats);
    const services = new Map<
      string,
      { calls: number; failures: Record<string, number>; buckets: number[] }
    >();
    for (const [field, value] of Object.entries(raw)) {
      const [tool = '', target = '', what = ''] = field.split('|');
      const key = `${tool}|${target}`;
      const s = services.get(key) ?? {
        calls: 0,
        failures: {},
        buckets: new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0),
      };
      const n = Number(value);
      if (what === 'calls') s.calls = n;
      else if (what.startsWith('fail:')) s.failures[what.slice(5)] = n;
      else if (what.startsWith('lat:')) s.buckets[Number(what.slice(4))] = n;
      services.set(key, s);
    }
    return [...services]
      .map(([key, s]) => {
        const [tool = '', target = ''] = key.split('|');
        return {
          tool,
          target,
          calls: s.calls,
          failures: s.failures,
          p50Ms: quantile(s.buckets, 0.5),
          p95Ms: quantile(s.buckets, 0.95),
        };
      })
      .sort((a, b) => a.tool.localeCompare(b.tool) || a.target.localeCompare(b.target));
  }

  /** Every lesson of the agent, and the agent's lessons version. */
  async lessons(agentId: string): Promise<{ version: number; lessons: Lesson[] }> {
    const k = memoryKeys(this.options.prefix, agentId);
    const [version, raw] = await Promise.all([
      this.redis.hget(k.meta, 'version'),
      this.redis.hgetall(k.lessons),
    ]);
    const lessons = Object.values(raw)
      .map((r) => Lesson.parse(JSON.parse(r)))
      .sort((a, b) => b.confidence - a.confidence || a.id.localeCompare(b.id));
    return { version: Number(version ?? 0), lessons };
  }

  async lesson(agentId: string, lessonId: string): Promise<Lesson | null> {
    const raw = await this.redis.hget(memoryKeys(this.options.prefix, agentId).lessons, lessonId);
    return raw ? Lesson.parse(JSON.parse(raw)) : null;
  }

  /**
   * Stores one reflection's lessons; answers the lessons version after it. With `readVersion` (the
   * version the reflection read), a lesson changed since keeps that change.
   */
  async saveReflection(
    agentId: string,
    lessons: readonly Lesson[],
    changed: boolean,
    now: string,
    readVersion?: number,
  ): Promise<number> {
    return (await this.script('save-reflection-4', this.keys(agentId), [
      changed ? '1' : '0',
      now,
      readVersion ?? '',
      ...lessons.flatMap((l) => [l.id, JSON.stringify(l)]),
    ])) as number;
  }

  /** Sets a lesson's status; null for an unknown lesson. */
  async setStatus(
    agentId: string,
    lessonId: string,
    status: LessonStatus,
    now: string,
  ): Promise<Lesson | null> {
    const raw = (await this.script('set-lesson-status-4', this.keys(agentId), [lessonId, status, now])) as
      string | null;
    return raw ? Lesson.parse(JSON.parse(raw)) : null;
  }

  /** True for the one caller per `intervalMs` whose call may go through to a blocked service as a probe. */
  async claimProbe(agentId: string, lessonId: string, intervalMs: number): Promise<boolean> {
    const key = probeKey(this.options.prefix, agentId, lessonId);
    return (await this.redis.set(key, '1', 'PX', intervalMs, 'NX')) === 'OK';
  }

  /** Counts negative feedback against each of `lessonIds` (the lessons a rated run applied). */
  async feedbackAgainst(agentId: string, lessonIds: readonly string[]): Promise<void> {
    if (lessonIds.length === 0) return;
    const k = memoryKeys(this.options.prefix, agentId);
    const tx = slotMulti(this.redis);
    for (const id of lessonIds) tx.hincrby(k.meta, `against:${id}`, 1);
    for (const key of memoryKeyList(k)) tx.pexpire(key, this.idleTtlMs);
    await tx.exec();
  }

  /**
   * Since the last reflection, per lesson: negative feedback on runs that applied it (`against`),
   * and runs that applied it and succeeded (`used`).
   */
  async sinceReflection(agentId: string): Promise<{ against: Map<string, number>; used: Set<string> }> {
    const meta = await this.redis.hgetall(memoryKeys(this.options.prefix, agentId).meta);
    const fields = (head: string): [string, number][] =>
      Object.entries(meta)
        .filter(([field]) => field.startsWith(head))
        .map(([field, n]) => [field.slice(head.length), Number(n)]);
    return { against: new Map(fields('against:')), used: new Set(fields('used:').map(([id]) => id)) };
  }

  /** Counters since the last reflection and when it was. */
  async reflectionState(agentId: string): Promise<ReflectionState> {
    const [since, last] = await this.redis.hmget(
      memoryKeys(this.options.prefix, agentId).meta,
      'sinceReflect',
      'lastReflectAt',
    );
    return { sinceReflection: Number(since ?? 0), lastReflectAt: last ?? null };
  }

  /**
   * Agents that have memory. An agent whose memory expired (idle) is dropped from the set here, so
   * the set is as large as the memory that exists.
   */
  async agents(): Promise<string[]> {
    const set = memoryAgentsKey(this.options.prefix);
    const agents = (await this.redis.smembers(set)).sort();
    const exists = await this.existing(agents);
    const gone = agents.filter((_, i) => !exists[i]);
    if (gone.length > 0) {
      await this.redis.srem(set, ...gone);
      // An agent recorded meanwhile (its script ran before its SADD) is put back.
      const back = await this.existing(gone);
      const again = gone.filter((_, i) => back[i]);
      if (again.length > 0) await this.redis.sadd(set, ...again);
    }
    return agents.filter((_, i) => exists[i]);
  }

  /** Whether each agent's memory hash exists, in one round trip. */
  private async existing(agents: readonly string[]): Promise<boolean[]> {
    if (agents.length === 0) return [];
    const tx = slotMulti(this.redis);
    for (const agentId of agents) tx.exists(memoryKeys(this.options.prefix, agentId).meta);
    return ((await tx.exec()) ?? []).map(([err, n]) => {
      if (err) throw err;
      return n === 1;
    });
  }
}
