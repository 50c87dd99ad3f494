/**
 * The sense loop's sources: webhooks and polled HTTP endpoints. Every event is normalised,
 * deduplicated by id (or content hash) within a window, merged with same-type events of its
 * source that arrive within a burst window, and written into its session's environment, whose
 * version then moves. Each source is polled by its own job with its own timeout and backoff, so
 * one hanging source never delays another; its status is kept for `GET /v1/sources`.
 */
import { DEFAULT_TENANT, scopedName } from '../domain/tenant.js';
import type { Queue } from 'bullmq';
import type { RedisClient } from '../state/redis-client.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import { retryDelay } from '../policy/retry-policy.js';
import { burstKey, sourcesKey, webhookSignatureKey } from '../state/keys.js';
import type { SessionStore } from '../state/session-store.js';
import { metrics } from '../telemetry/metrics.js';
import { egressClient, type EgressClient } from '../tools/egress-client.js';
import { parseAllowHosts, type EgressPolicy } from '../tools/egress-policy.js';
import { InboundEvent, SENSE_JOB } from './sense-jobs.js';
import { contentHash, type SessionService } from './session-service.js';
import { slotMulti } from '../state/slot-multi.js';

export const PolledSource = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/),
  url: z.url({ protocol: /^https?$/ }),
  /** At least 200 ms. */
  intervalMs: z.number().int().min(200),
  /** @defaultValue 5000 */
  timeoutMs: z.number().int().positive().default(5000),
  /** Session whose environment receives the events. */
  sessionKey: z.string().min(1).max(128).optional(),
  /** Event type when the source's answer gives none. @defaultValue "poll" */
  type: z.string().min(1).max(64).default('poll'),
});
export type PolledSource = z.infer<typeof PolledSource>;

/** An event once normalised. */
export interface SenseEvent {
  source: string;
  eventId: string;
  sessionKey?: string;
  type: string;
  payload: unknown;
  receivedAt: string;
  /** For a merged burst: how many events it stands for. */
  count?: number;
  /** The tenant of the source (webhooks). */
  tenant?: string;
}

/** A source's health as `GET /v1/sources` shows it. */
export const SourceStatus = z.object({
  name: z.string(),
  kind: z.enum(['webhook', 'poll']),
  /** `degraded`: 1 or 2 consecutive failed polls; `down`: 3 or more. */
  status: z.enum(['ok', 'degraded', 'down']),
  lastError: z.string().nullable(),
  lastSuccessAt: z.string().nullable(),
  lastEventAt: z.string().nullable(),
  events: z.number().int().nonnegative(),
  duplicates: z.number().int().nonnegative(),
  /** Consecutive failed polls. */
  failures: z.number().int().nonnegative(),
  /** While backing off after failures: when the next poll may go out. */
  nextAttemptAt: z.string().nullable(),
});
export type SourceStatus = z.infer<typeof SourceStatus>;

export interface SourceDeps {
  readonly redis: RedisClient;
  readonly prefix: string;
  readonly sessions: SessionStore;
  readonly sessionService: SessionService;
  readonly senseQueue: Queue;
  /** Same-type events of one source within this window merge into one. 0 turns merging off. @defaultValue 500 */
  readonly burstWindowMs: number;
  readonly environmentCap: number;
  /**
   * The workers' egress policy and response byte cap, the http tool's: a poll reaches what a tool
   * call may reach, follows no redirect and reads no more than the cap.
   * @defaultValue public addresses only, 10 MiB
   */
  readonly egress?: EgressPolicy;
  /**
   * A source's status nobody updates (no event, no poll) for this long expires, and the source
   * leaves `GET /v1/sources` until it is heard from again. @defaultValue 2592000 (30 days)
   */
  readonly statusTtlSeconds?: number;
  readonly logger: Logger;
}

const BURST_SAMPLE = 10;

export class SourceService {
  private readonly client: EgressClient;

  constructor(private readonly deps: SourceDeps) {
    this.client = egressClient(deps.egress ?? parseAllowHosts(''));
  }

  /** Normalises, deduplicates and routes one event. Returns what became of it. */
  async ingest(
    source: string,
    raw: InboundEvent,
    kind: SourceStatus['kind'],
    tenant?: string,
  ): Promise<'accepted' | 'duplicate'> {
    const event: SenseEvent = {
      source,
      ...(tenant ? { tenant } : {}),
      eventId: raw.eventId ?? `sha256:${contentHash({ type: raw.type, payload: raw.payload ?? null })}`,
      ...(raw.sessionKey ? { sessionKey: raw.sessionKey } : {}),
      type: raw.type,
      payload: raw.payload ?? null,
      receivedAt: new Date().toISOString(),
    };
    metrics.eventsIngested.inc({ kind });
    if (!(await this.deps.sessionService.firstSighting(`source:${source}`, event.eventId))) {
      metrics.eventsDeduplicated.inc({ kind });
      await this.bumpStatus(source, kind, { duplicates: 1 });
      return 'duplicate';
    }
    await this.bumpStatus(source, kind, { events: 1, lastEventAt: event.receivedAt });
    if (this.deps.burstWindowMs <= 0) {
      await this.write(event);
      return 'accepted';
    }
    const key = burstKey(this.deps.prefix, source, event.type, event.sessionKey ?? '');
    // With its TTL in the same step, so a window whose flush never comes cannot stay.
    const replies = await slotMulti(this.deps.redis)
      .rpush(key, JSON.stringify(event))
      .pexpire(key, this.deps.burstWindowMs * 10)
      .exec();
    const length = Number(replies?.[0]?.[1] ?? 0);
    // The first event of a burst opens its window; the flush merges whatever arrived in it.
    if (length === 1) {
      await this.deps.senseQueue.add(
        SENSE_JOB.burstFlush,
        { key },
        { delay: this.deps.burstWindowMs, removeOnComplete: true, removeOnFail: { age: 86_400 } },
      );
    }
    return 'accepted';
  }

  /** Merges a closed burst window into one event and writes it. */
  async flush(key: string): Promise<void> {
    const replies = await slotMulti(this.deps.redis).lrange(key, 0, -1).del(key).exec();
    const events = ((replies?.[0]?.[1] as string[] | undefined) ?? []).map(
      (e) => JSON.parse(e) as SenseEvent,
    );
    const first = events[0];
    if (!first) return;
    if (events.length === 1) return this.write(first);
    await this.write({
      ...first,
      eventId: `burst:${first.eventId}`,
      payload: {
        summary: `${events.length} ${first.type} events from ${first.source}`,
        sample: events.slice(0, BURST_SAMPLE).map((e) => e.payload),
      },
      count: events.length,
    });
  }

  /** Into the environment of the session it names, within its source's tenant. */
  private async write(event: SenseEvent): Promise<void> {
    if (!event.sessionKey) return;
    const sessionKey = scopedName(event.tenant ?? DEFAULT_TENANT, event.sessionKey);
    await this.deps.sessions.addEnvironmentEvent(sessionKey, event, this.deps.environmentCap);
  }

  /** One poll of a source, under its own timeout; failures back off exponentially. */
  async poll(source: PolledSource): Promise<void> {
    const status = await this.status(source.name);
    if (status?.nextAttemptAt && Date.parse(status.nextAttemptAt) > Date.now()) return;
    try {
      const res = await this.client.fetch(new URL(source.url), {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(source.timeoutMs),
      });
      if (res.status < 200 || res.status >= 300) throw new Error(`HTTP ${res.status}`);
      const body = JSON.parse(res.text) as unknown;
      const items = Array.isArray(body) ? body : [body];
      for (const item of items) {
        // An item is an event envelope only if it says so; anything else is the payload itself.
        const envelope =
          typeof item === 'object' && item !== null && ('payload' in item || 'eventId' in item);
        const parsed = InboundEvent.safeParse(item);
        const event: InboundEvent =
          envelope && parsed.success
            ? { ...parsed.data, type: parsed.data.type === 'event' ? source.type : parsed.data.type }
            : { type: source.type, payload: item as unknown };
        const sessionKey = event.sessionKey ?? source.sessionKey;
        await this.ingest(source.name, { ...event, ...(sessionKey ? { sessionKey } : {}) }, 'poll');
      }
      metrics.sourcePolls.inc({ source: source.name, outcome: 'ok' });
      await this.setStatus(source.name, 'poll', {
        status: 'ok',
        lastSuccessAt: new Date().toISOString(),
        failures: 0,
        nextAttemptAt: null,
      });
    } catch (err) {
      metrics.sourcePolls.inc({ source: source.name, outcome: 'error' });
      const failures = (status?.failures ?? 0) + 1;
      const delay = retryDelay(failures, {});
      await this.setStatus(source.name, 'poll', {
        status: failures >= 3 ? 'down' : 'degraded',
        lastError: err instanceof Error ? err.message : String(err),
        failures,
        nextAttemptAt: new Date(Date.now() + delay).toISOString(),
      });
      this.deps.logger.warn(
        { source: source.name, failures, err: err instanceof Error ? err.message : String(err) },
        'source poll failed',
      );
    }
  }

  /** Every known source's status; a source whose status expired is dropped from the set here. */
  async statuses(): Promise<SourceStatus[]> {
    const set = sourcesKey(this.deps.prefix);
    const names = await this.deps.redis.smembers(set);
    const all = await Promise.all(names.map((n) => this.status(n)));
    const gone = names.filter((_, i) => all[i] === null);
    if (gone.length > 0) {
      await this.deps.redis.srem(set, ...gone);
      // One written meanwhile (its status exists again) is put back.
      const back = await Promise.all(gone.map((n) => this.deps.redis.exists(this.key(n))));
      const again = gone.filter((_, i) => back[i] === 1);
      if (again.length > 0) await this.deps.redis.sadd(set, ...again);
    }
    return all.filter((s): s is SourceStatus => s !== null).sort((a, b) => a.name.localeCompare(b.name));
  }

  async status(name: string): Promise<SourceStatus | null> {
    const raw = await this.deps.redis.hgetall(this.key(name));
    if (!raw.kind) return null;
    const num = (k: string): number => Number(raw[k] ?? 0);
    const str = (k: string): string | null => (raw[k] ? raw[k] : null);
    return {
      name,
      kind: raw.kind as SourceStatus['kind'],
      status: (raw.status as SourceStatus['status'] | undefined) ?? 'ok',
      lastError: str('lastError'),
      lastSuccessAt: str('lastSuccessAt'),
      lastEventAt: str('lastEventAt'),
      events: num('events'),
      duplicates: num('duplicates'),
      failures: num('failures'),
      nextAttemptAt: str('nextAttemptAt'),
    };
  }

  /**
   * Remembers a webhook signature (`t` and `v1`) for `ttlSeconds`; false when it was seen before
   * (a replay). One `SET NX EX`.
   */
  async firstSignature(source: string, t: number, v1: string, ttlSeconds: number): Promise<boolean> {
    const key = webhookSignatureKey(this.deps.prefix, source, t, v1);
    return (await this.deps.redis.set(key, '1', 'EX', ttlSeconds, 'NX')) === 'OK';
  }

  /** Registers a source (a configured poller) so it shows before its first event. */
  async register(name: string, kind: SourceStatus['kind']): Promise<void> {
    await this.setStatus(name, kind, {});
  }

  private get statusTtl(): number {
    return this.deps.statusTtlSeconds ?? 30 * 86_400;
  }

  private key(name: string): string {
    return `${sourcesKey(this.deps.prefix)}:${name}`;
  }

  /** Fields are written one by one (counters by HINCRBY), so concurrent events never lose updates. */
  private async setStatus(
    name: string,
    kind: SourceStatus['kind'],
    patch: Partial<SourceStatus>,
  ): Promise<void> {
    const fields = Object.entries(patch).flatMap(([k, v]) => [
      k,
      v === null || v === undefined ? '' : String(v),
    ]);
    const tx = slotMulti(this.deps.redis)
      .sadd(sourcesKey(this.deps.prefix), name)
      .hset(this.key(name), 'kind', kind);
    if (fields.length > 0) tx.hset(this.key(name), ...fields);
    await tx.expire(this.key(name), this.statusTtl).exec();
  }

  private async bumpStatus(
    name: string,
    kind: SourceStatus['kind'],
    patch: { events?: number; duplicates?: number; lastEventAt?: string },
  ): Promise<void> {
    const key = this.key(name);
    const tx = slotMulti(this.deps.redis).sadd(sourcesKey(this.deps.prefix), name).hset(key, 'kind', kind);
    if (patch.events) tx.hincrby(key, 'events', patch.events);
    if (patch.duplicates) tx.hincrby(key, 'duplicates', patch.duplicates);
    if (patch.lastEventAt) tx.hset(key, 'lastEventAt', patch.lastEventAt);
    // A webhook that delivers is up.
    if (kind === 'webhook' && patch.lastEventAt)
      tx.hset(key, 'status', 'ok', 'lastSuccessAt', patch.lastEventAt);
    await tx.expire(key, this.statusTtl).exec();
  }
}
