/**
 * Each tenant's schedules in Redis: the schedules themselves (a hash per tenant, capped at
 * `TETRALOOP_SCHEDULES_MAX`) and what each one's firings did (the last firing, its run, a count
 * per outcome). When a schedule fires is BullMQ's business (`schedules/schedule-service.ts`).
 */
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { FIRING_OUTCOMES, Schedule, ScheduleState, type FiringOutcome } from '../schedules/schedule-model.js';
import { scheduleKeys } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

export class ScheduleLimitError extends Error {
  readonly code = 'too_many_schedules';
  constructor(readonly limit: number) {
    super(`a tenant holds at most ${limit} schedules (TETRALOOP_SCHEDULES_MAX); delete one first`);
    this.name = 'ScheduleLimitError';
  }
}

/** A new schedule's id: random, so it never names one that exists or existed. */
export const newScheduleId = (): string => `sch_${randomBytes(10).toString('hex')}`;

export class ScheduleStore {
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    /** Most schedules one tenant may hold. */
    private readonly maxPerTenant: number,
  ) {
    this.script = loadScripts(redis);
  }

  private keys(tenant: string) {
    return scheduleKeys(this.prefix, tenant);
  }

  /** Adds a schedule within the tenant's cap (ScheduleLimitError past it), in one script. */
  async add(tenant: string, schedule: Schedule): Promise<void> {
    const added = await this.script(
      'add-capped-1',
      [this.keys(tenant).schedules],
      [schedule.id, JSON.stringify(schedule), this.maxPerTenant],
    );
    if (added !== 1) throw new ScheduleLimitError(this.maxPerTenant);
  }

  /** Replaces a schedule that exists; false when it does not (deleted meanwhile). */
  async replace(tenant: string, schedule: Schedule): Promise<boolean> {
    const key = this.keys(tenant).schedules;
    if (!(await this.redis.hexists(key, schedule.id))) return false;
    await this.redis.hset(key, schedule.id, JSON.stringify(schedule));
    return true;
  }

  async get(tenant: string, id: string): Promise<Schedule | null> {
    const raw = await this.redis.hget(this.keys(tenant).schedules, id);
    return raw === null ? null : Schedule.parse(JSON.parse(raw));
  }

  /** The tenant's schedules, oldest first. */
  async list(tenant: string): Promise<Schedule[]> {
    const all = await this.redis.hvals(this.keys(tenant).schedules);
    return all
      .map((raw) => Schedule.parse(JSON.parse(raw)))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  /** Deletes a schedule and what its firings did; false when there was none. */
  async delete(tenant: string, id: string): Promise<boolean> {
    const keys = this.keys(tenant);
    const removed = await this.redis.hdel(keys.schedules, id);
    await this.redis.del(keys.state(id));
    return removed === 1;
  }

  /** Records a firing: its time, its outcome (counted) and the run it started, if any. */
  async recordFiring(
    tenant: string,
    id: string,
    firing: { readonly firedAt: number; readonly outcome: FiringOutcome; readonly runId?: string },
  ): Promise<void> {
    const key = this.keys(tenant).state(id);
    const tx = this.redis
      .multi()
      .hset(key, 'lastFiredAt', new Date(firing.firedAt).toISOString(), 'lastOutcome', firing.outcome)
      .hincrby(key, `firings:${firing.outcome}`, 1);
    if (firing.runId !== undefined) tx.hset(key, 'lastRunId', firing.runId);
    await tx.exec();
  }

  /** Records the run a manual trigger started, as the schedule's last run. */
  async recordRun(tenant: string, id: string, runId: string): Promise<void> {
    await this.redis.hset(this.keys(tenant).state(id), 'lastRunId', runId);
  }

  /** What a schedule's firings did. */
  async state(tenant: string, id: string): Promise<ScheduleState> {
    const raw = await this.redis.hgetall(this.keys(tenant).state(id));
    return {
      lastFiredAt: raw.lastFiredAt ?? null,
      lastRunId: raw.lastRunId ?? null,
      lastOutcome: (FIRING_OUTCOMES as readonly string[]).includes(raw.lastOutcome ?? '')
        ? (raw.lastOutcome as FiringOutcome)
        : null,
      firings: Object.fromEntries(FIRING_OUTCOMES.map((o) => [o, Number(raw[`firings:${o}`] ?? 0)])),
    };
  }
}
