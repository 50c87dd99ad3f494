/**
 * The sense loop's sources: webhooks, and configured sources run on a schedule: polled HTTP
 * endpoints, timers, watched directories (see `file-source.ts`) and WebSocket servers, whose one
 * connection the schedule keeps held (see `websocket-source.ts`). Every event is normalised,
 * deduplicated by id (or content hash) within a window, merged with same-type events of its
 * source that arrive within a burst window, and written into its session's environment, whose
 * version then moves; a timer or file source with `wake` also sends the session a message for
 * each, starting a run through its lane (see `wake.ts`). Each source is polled by its own job with
 * its own timeout and backoff, so one hanging source never delays another; its status is kept,
 * with its tenant, for `GET /v1/sources`.
 * An event naming a session key outside the API's alphabet (`SessionKey`: no `~`, so never another
 * tenant's session) is dropped, counted and logged.
 */
import { DEFAULT_TENANT, TenantId, scopedName } from '../domain/tenant.js';
import type { Queue } from 'bullmq';
import { isAbsolute } from 'node:path';
import type { RedisClient } from '../state/redis-client.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import { retryDelay } from '../policy/retry-policy.js';
import { burstKey, fileSourceKey, sourceLeaseKey, sourcesKey, webhookSignatureKey } from '../state/keys.js';
import type { SessionStore } from '../state/session-store.js';
import { metrics } from '../telemetry/metrics.js';
import { egressClient, type EgressClient } from '../tools/egress-client.js';
import { parseAllowHosts, type EgressPolicy } from '../tools/egress-policy.js';
import { InboundEvent, SENSE_JOB, SessionKey, type SensePayload } from './sense-jobs.js';
import { fileEvent, fileSignature, listFiles } from './file-source.js';
import { contentHash, type SessionService } from './session-service.js';
import { wakeData, wakeDeliveryId, wakeMessage } from './wake.js';
import { WebSocketSource, WebSocketSources } from './websocket-source.js';
import { slotMulti } from '../state/slot-multi.js';

const SourceName = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}');

/** An HTTP endpoint polled every `intervalMs` (the kind of an entry without `kind`). */
export const HttpSource = z.strictObject({
  kind: z.literal('http').default('http'),
  name: SourceName,
  /** Tenant whose session receives the events. @defaultValue "default" */
  tenant: TenantId.default(DEFAULT_TENANT),
  url: z.url({ protocol: /^https?$/ }),
  /** At least 200 ms. */
  intervalMs: z.number().int().min(200),
  /** @defaultValue 5000 */
  timeoutMs: z.number().int().positive().default(5000),
  /** Session whose environment receives the events (an event of its answer may name its own). */
  sessionKey: SessionKey.optional(),
  /** Event type when the source's answer gives none. @defaultValue "poll" */
  type: z.string().min(1).max(64).default('poll'),
});
export type HttpSource = z.infer<typeof HttpSource>;

/** One event every `intervalMs` (a heartbeat), however many workers run. */
export const TimerSource = z.strictObject({
  kind: z.literal('timer'),
  name: SourceName,
  /** Tenant whose session receives the events. @defaultValue "default" */
  tenant: TenantId.default(DEFAULT_TENANT),
  /** At least 1000 ms. */
  intervalMs: z.number().int().min(1000),
  sessionKey: SessionKey,
  /** @defaultValue "timer" */
  type: z.string().min(1).max(64).default('timer'),
  /** The payload of every event. @defaultValue `{"at": <the tick's scheduled time>}` */
  payload: z.unknown().optional(),
  /**
   * Each tick also starts a session run through the lane, as a message would (`sessions/wake.ts`):
   * the message is the payload when it is a string (or an object's `task` or `text`).
   * @defaultValue false
   */
  wake: z.boolean().optional(),
});
export type TimerSource = z.infer<typeof TimerSource>;

/** A directory on the worker's disk, listed every `intervalMs`: each new or changed file is an event. */
export const FileSource = z.strictObject({
  kind: z.literal('file'),
  name: SourceName,
  /** Tenant whose session receives the events. @defaultValue "default" */
  tenant: TenantId.default(DEFAULT_TENANT),
  dir: z.string().refine((d) => isAbsolute(d), 'must be an absolute path'),
  sessionKey: SessionKey,
  /** At least 1000 ms. @defaultValue 5000 */
  intervalMs: z.number().int().min(1000).default(5000),
  /** A glob over file names (`*`, `?`), e.g. `*.json`. @defaultValue every file */
  pattern: z
    .string()
    .min(1)
    .max(256)
    .refine((p) => !p.includes('/'), 'matches file names: no "/"')
    .optional(),
  /** Files taken per pass at most, oldest change first; the rest wait for the next. @defaultValue 100 */
  maxFiles: z.number().int().min(1).max(1000).default(100),
  /** @defaultValue "file" */
  type: z.string().min(1).max(64).default('file'),
  /**
   * Each event also starts a session run through the lane, as a message would; the file stays data
   * in the environment, the message only names it (`sessions/wake.ts`). @defaultValue false
   */
  wake: z.boolean().optional(),
});
export type FileSource = z.infer<typeof FileSource>;

/** A configured source (`TETRALOOP_SOURCES`): run by a job scheduler of its own every `intervalMs`. */
export const PolledSource = z.discriminatedUnion('kind', [
  HttpSource,
  TimerSource,
  FileSource,
  WebSocketSource,
]);
export type PolledSource = z.infer<typeof PolledSource>;

/** `TETRALOOP_SOURCES`: each name once. */
export const PolledSources = z.array(PolledSource).superRefine((sources, ctx) => {
  const seen = new Set<string>();
  sources.forEach((s, i) => {
    if (seen.has(s.name))
      ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `"${s.name}" is configured twice` });
    seen.add(s.name);
  });
});

/** The kind a configured source shows in its status. */
export const statusKindOf = (source: PolledSource): SourceStatus['kind'] =>
  source.kind === 'http' ? 'poll' : source.kind;

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
  /**
   * Written, it also wakes its session (a run through the lane); `trusted`: its payload is the
   * operator's configuration, which may be the message. Not kept in the environment.
   */
  wake?: { readonly trusted: boolean };
}

/** Why a source's event was dropped before reaching a session (`tetraloop_source_events_refused_total{reason}`). */
export const SOURCE_EVENT_REFUSALS = {
  /** It names a session key outside the API's alphabet (`SessionKey`). */
  invalidSessionKey: 'invalid_session_key',
} as const;
export type SourceEventRefusal = (typeof SOURCE_EVENT_REFUSALS)[keyof typeof SOURCE_EVENT_REFUSALS];

/** A source's health as `GET /v1/sources` shows it. */
export const SourceStatus = z.object({
  name: z.string(),
  /** `poll`: an HTTP source. */
  kind: z.enum(['webhook', 'poll', 'timer', 'file', 'websocket']),
  /** `degraded`: 1 or 2 consecutive failed polls (directory passes, connection attempts); `down`: 3 or more. */
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
  private readonly sockets: WebSocketSources;

  constructor(private readonly deps: SourceDeps) {
    this.client = egressClient(deps.egress ?? parseAllowHosts(''));
    this.sockets = new WebSocketSources({
      redis: deps.redis,
      leaseKey: (name) => sourceLeaseKey(deps.prefix, name),
      egress: this.client.policy,
      sink: (source, text) => this.item(source, jsonOrText(text), 'websocket'),
      logger: deps.logger,
    });
  }

  /** Closes the WebSocket connections this process holds (their leases go to other workers). */
  async close(): Promise<void> {
    await this.sockets.close();
  }

  /**
   * Normalises, deduplicates and routes one event into its source's tenant (`tenant`: the default
   * tenant's when absent). Returns what became of it: one naming a session key outside the API's
   * alphabet is refused, whoever made it.
   */
  async ingest(
    source: string,
    raw: InboundEvent,
    kind: SourceStatus['kind'],
    tenant?: string,
    wake?: SenseEvent['wake'],
  ): Promise<'accepted' | 'duplicate' | 'refused'> {
    if (raw.sessionKey !== undefined && !SessionKey.safeParse(raw.sessionKey).success) {
      this.refuse(source, kind, SOURCE_EVENT_REFUSALS.invalidSessionKey, raw.sessionKey);
      return 'refused';
    }
    const owner = tenant ?? DEFAULT_TENANT;
    const event: SenseEvent = {
      source,
      ...(tenant ? { tenant } : {}),
      eventId: raw.eventId ?? `sha256:${contentHash({ type: raw.type, payload: raw.payload ?? null })}`,
      ...(raw.sessionKey ? { sessionKey: raw.sessionKey } : {}),
      type: raw.type,
      payload: raw.payload ?? null,
      receivedAt: new Date().toISOString(),
      ...(wake ? { wake } : {}),
    };
    metrics.eventsIngested.inc({ kind });
    if (!(await this.deps.sessionService.firstSighting(`source:${source}`, event.eventId))) {
      metrics.eventsDeduplicated.inc({ kind });
      await this.bumpStatus(source, kind, owner, { duplicates: 1 });
      return 'duplicate';
    }
    await this.bumpStatus(source, kind, owner, { events: 1, lastEventAt: event.receivedAt });
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

  /** Drops a source's event: counted by reason and logged with (the start of) what it named. */
  private refuse(
    source: string,
    kind: SourceStatus['kind'],
    reason: SourceEventRefusal,
    named: unknown,
  ): void {
    metrics.sourceEventsRefused.inc({ reason });
    this.deps.logger.warn(
      { source, kind, reason, sessionKey: String(JSON.stringify(named)).slice(0, 200) },
      'source event refused: it names no session key the API accepts',
    );
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

  /**
   * Into the environment of the session it names, within its source's tenant; then, for a source
   * that wakes its session, a message to it (a run through its lane), sent once the event is there.
   */
  private async write(event: SenseEvent): Promise<void> {
    if (!event.sessionKey) return;
    const { wake, ...written } = event;
    const sessionKey = scopedName(event.tenant ?? DEFAULT_TENANT, event.sessionKey);
    await this.deps.sessions.addEnvironmentEvent(sessionKey, written, this.deps.environmentCap);
    if (!wake) return;
    // The job id derives from the event: writing it again adds no second message while the first
    // job is kept, and the message's own id keeps it to one run within the dedupe window after.
    const deliveryId = wakeDeliveryId(written);
    const data = wakeData(written, wake.trusted);
    await this.deps.senseQueue.add(
      SENSE_JOB.message,
      {
        sessionKey,
        message: wakeMessage(written, wake.trusted),
        deliveryId,
        ...(data.length ? { data } : {}),
      } satisfies SensePayload<typeof SENSE_JOB.message>,
      { jobId: deliveryId, removeOnComplete: { age: 60 }, removeOnFail: { age: 3600 } },
    );
  }

  /**
   * One run of a configured source: an HTTP poll under its own timeout, a timer's tick (`at`: its
   * scheduled time) or a pass over a directory. Failures back off exponentially.
   */
  async poll(source: PolledSource, at = Date.now()): Promise<void> {
    const kind = statusKindOf(source);
    const status = await this.status(source.name);
    const { tenant } = source;
    if (status?.nextAttemptAt && Date.parse(status.nextAttemptAt) > Date.now()) return;
    try {
      if (source.kind === 'timer') await this.tick(source, at);
      else if (source.kind === 'file') await this.scan(source);
      else if (source.kind === 'websocket') await this.sockets.check(source);
      else await this.fetch(source);
      metrics.sourcePolls.inc({ source: source.name, outcome: 'ok' });
      await this.setStatus(source.name, kind, tenant, {
        status: 'ok',
        lastSuccessAt: new Date().toISOString(),
        failures: 0,
        nextAttemptAt: null,
      });
    } catch (err) {
      metrics.sourcePolls.inc({ source: source.name, outcome: 'error' });
      const failures = (status?.failures ?? 0) + 1;
      const delay = retryDelay(failures, {});
      await this.setStatus(source.name, kind, tenant, {
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

  private async fetch(source: HttpSource): Promise<void> {
    const res = await this.client.fetch(new URL(source.url), {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(source.timeoutMs),
    });
    if (res.status < 200 || res.status >= 300) throw new Error(`HTTP ${res.status}`);
    await this.item(source, JSON.parse(res.text) as unknown, 'poll');
  }

  /**
   * What an HTTP source answered or a WebSocket source's message held: an event, or a list of
   * them. An item is an event envelope only if it says so; anything else is the payload itself. An
   * envelope naming a session key outside the API's alphabet is refused, not taken as a payload.
   */
  private async item(
    source: HttpSource | WebSocketSource,
    body: unknown,
    kind: 'poll' | 'websocket',
  ): Promise<void> {
    for (const item of Array.isArray(body) ? body : [body]) {
      const envelope = typeof item === 'object' && item !== null && ('payload' in item || 'eventId' in item);
      const parsed = InboundEvent.safeParse(item);
      if (envelope && !parsed.success && parsed.error.issues.some((i) => i.path[0] === 'sessionKey')) {
        this.refuse(
          source.name,
          kind,
          SOURCE_EVENT_REFUSALS.invalidSessionKey,
          (item as { sessionKey?: unknown }).sessionKey,
        );
        continue;
      }
      const event: InboundEvent =
        envelope && parsed.success
          ? { ...parsed.data, type: parsed.data.type === 'event' ? source.type : parsed.data.type }
          : { type: source.type, payload: item as unknown };
      const sessionKey = event.sessionKey ?? source.sessionKey;
      await this.ingest(
        source.name,
        { ...event, ...(sessionKey ? { sessionKey } : {}) },
        kind,
        source.tenant,
      );
    }
  }

  /** A timer's tick: its id is its scheduled time, so a redelivered tick job is one event. */
  private async tick(source: TimerSource, at: number): Promise<void> {
    await this.ingest(
      source.name,
      {
        eventId: `tick:${at}`,
        type: source.type,
        sessionKey: source.sessionKey,
        payload: source.payload ?? { at: new Date(at).toISOString() },
      },
      'timer',
      source.tenant,
      source.wake ? { trusted: true } : undefined,
    );
  }

  /**
   * A pass over a file source's directory: each file whose (mtime, size) differs from when it was
   * last taken is an event, oldest change first, at most `maxFiles`. What was taken is kept in a
   * hash (idle TTL), so an unchanged file is not taken again once the dedupe window has passed;
   * two passes that overlap take a file once by its event id.
   */
  private async scan(source: FileSource): Promise<void> {
    const { files, complete } = await listFiles(source.dir, source.pattern);
    const key = fileSourceKey(this.deps.prefix, source.name);
    const taken = await this.deps.redis.hgetall(key);
    const changed = files
      .filter((f) => taken[f.name] !== fileSignature(f))
      .sort((a, b) => a.mtimeMs - b.mtimeMs || a.name.localeCompare(b.name))
      .slice(0, source.maxFiles);
    for (const file of changed) {
      const { eventId, payload } = await fileEvent(file);
      await this.ingest(
        source.name,
        { eventId, type: source.type, sessionKey: source.sessionKey, payload },
        'file',
        source.tenant,
        source.wake ? { trusted: false } : undefined,
      );
      await this.deps.redis.hset(key, file.name, fileSignature(file));
    }
    const tx = slotMulti(this.deps.redis);
    // Files gone from a directory listed whole are forgotten (one written again is new).
    const listed = new Set(files.map((f) => f.name));
    const gone = complete ? Object.keys(taken).filter((name) => !listed.has(name)) : [];
    if (gone.length > 0) tx.hdel(key, ...gone);
    await tx.expire(key, this.statusTtl).exec();
  }

  /**
   * The statuses of one tenant's sources (each status keeps the tenant of the source that wrote
   * it; one written before statuses kept it is nobody's until its source is heard from again). A
   * source whose status expired is dropped from the set here.
   */
  async statuses(tenant: string): Promise<SourceStatus[]> {
    const set = sourcesKey(this.deps.prefix);
    const names = await this.deps.redis.smembers(set);
    const all = await Promise.all(names.map((n) => this.owned(n)));
    const gone = names.filter((_, i) => all[i] === null);
    if (gone.length > 0) {
      await this.deps.redis.srem(set, ...gone);
      // One written meanwhile (its status exists again) is put back.
      const back = await Promise.all(gone.map((n) => this.deps.redis.exists(this.key(n))));
      const again = gone.filter((_, i) => back[i] === 1);
      if (again.length > 0) await this.deps.redis.sadd(set, ...again);
    }
    return all
      .flatMap((s) => (s !== null && s.tenant === tenant ? [s.status] : []))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  async status(name: string): Promise<SourceStatus | null> {
    return (await this.owned(name))?.status ?? null;
  }

  /** A source's status and the tenant it belongs to (null: written before statuses kept it). */
  private async owned(name: string): Promise<{ status: SourceStatus; tenant: string | null } | null> {
    const raw = await this.deps.redis.hgetall(this.key(name));
    if (!raw.kind) return null;
    const num = (k: string): number => Number(raw[k] ?? 0);
    const str = (k: string): string | null => (raw[k] ? raw[k] : null);
    const status: SourceStatus = {
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
    return { status, tenant: str('tenant') };
  }

  /**
   * Remembers a webhook signature (`t` and `v1`) for `ttlSeconds`; false when it was seen before
   * (a replay). One `SET NX EX`.
   */
  async firstSignature(source: string, t: number, v1: string, ttlSeconds: number): Promise<boolean> {
    const key = webhookSignatureKey(this.deps.prefix, source, t, v1);
    return (await this.deps.redis.set(key, '1', 'EX', ttlSeconds, 'NX')) === 'OK';
  }

  /** Registers a source (a configured poller) so it shows to its tenant before its first event. */
  async register(name: string, kind: SourceStatus['kind'], tenant: string): Promise<void> {
    await this.setStatus(name, kind, tenant, {});
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
    tenant: string,
    patch: Partial<SourceStatus>,
  ): Promise<void> {
    const fields = Object.entries(patch).flatMap(([k, v]) => [
      k,
      v === null || v === undefined ? '' : String(v),
    ]);
    const tx = slotMulti(this.deps.redis)
      .sadd(sourcesKey(this.deps.prefix), name)
      .hset(this.key(name), 'kind', kind, 'tenant', tenant);
    if (fields.length > 0) tx.hset(this.key(name), ...fields);
    await tx.expire(this.key(name), this.statusTtl).exec();
  }

  private async bumpStatus(
    name: string,
    kind: SourceStatus['kind'],
    tenant: string,
    patch: { events?: number; duplicates?: number; lastEventAt?: string },
  ): Promise<void> {
    const key = this.key(name);
    const tx = slotMulti(this.deps.redis)
      .sadd(sourcesKey(this.deps.prefix), name)
      .hset(key, 'kind', kind, 'tenant', tenant);
    if (patch.events) tx.hincrby(key, 'events', patch.events);
    if (patch.duplicates) tx.hincrby(key, 'duplicates', patch.duplicates);
    if (patch.lastEventAt) tx.hset(key, 'lastEventAt', patch.lastEventAt);
    // A webhook that delivers is up.
    if (kind === 'webhook' && patch.lastEventAt)
      tx.hset(key, 'status', 'ok', 'lastSuccessAt', patch.lastEventAt);
    await tx.expire(key, this.statusTtl).exec();
  }
}

/** A message's JSON, or its text as the payload when it is not JSON. */
function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
