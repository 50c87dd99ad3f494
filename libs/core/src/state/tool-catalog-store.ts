/**
 * The custom tool catalog in Redis. Each worker process that serves custom tools publishes them
 * (name, description, JSON Schemas, queue, version, schema hash) under its worker id, and again on
 * every heartbeat; every other process (the API, the planners, workers of other queues) reads the
 * catalog to check graphs, plan and route. Bounded: a worker's entry goes when its heartbeat runs
 * out, a tool's when no worker has served it for the catalog TTL, and each tool keeps its last
 * `MAX_VERSIONS` versions; the keys themselves expire a TTL after the last heartbeat.
 *
 * A tool stays known for the TTL after its last worker stopped (a graph naming it is accepted and
 * its nodes wait in the tool's queue until a worker serves it again); only a tool never seen, or
 * not for the TTL, is unknown.
 */
import { z } from 'zod';
import { CustomToolInfo } from '../tools/custom-tool.js';
import { toolCatalogKeys, type ToolCatalogKeys } from './keys.js';
import type { RedisClient } from './redis-client.js';
import { slotMulti } from './slot-multi.js';

/** Versions of one tool the catalog keeps (the newest): enough for a rolling deploy. */
export const MAX_VERSIONS = 8;

/** One version of a tool as workers served it. */
export const ToolVersion = z.object({
  version: z.string(),
  schemaHash: z.string(),
  inputSchema: z.record(z.string(), z.unknown()),
  outputSchema: z.record(z.string(), z.unknown()),
  /** When a worker last served it (ms). */
  seenAt: z.number(),
});
export type ToolVersion = z.infer<typeof ToolVersion>;

/** A tool in the catalog: its latest definition, and each version still served or recently seen. */
export const ToolCatalogEntry = z.object({
  tool: CustomToolInfo,
  versions: z.array(ToolVersion),
  /** When a worker last served any version of it (ms). */
  seenAt: z.number(),
});
export type ToolCatalogEntry = z.infer<typeof ToolCatalogEntry>;

/** A live worker process and what it serves. */
export const ToolWorkerEntry = z.object({
  workerId: z.string(),
  queues: z.array(z.string()),
  tools: z.array(
    z.object({ name: z.string(), version: z.string(), schemaHash: z.string(), queue: z.string() }),
  ),
  /** When it last beat (ms). */
  beatAt: z.number(),
});
export type ToolWorkerEntry = z.infer<typeof ToolWorkerEntry>;

/** The catalog as one read finds it: known tools (within the TTL) and live workers. */
export interface ToolCatalogSnapshot {
  readonly tools: ReadonlyMap<string, ToolCatalogEntry>;
  readonly workers: readonly ToolWorkerEntry[];
}

export interface ToolCatalogStoreOptions {
  readonly prefix: string;
  /** How long a tool stays known after it was last served (ms). @defaultValue 24 h */
  readonly catalogTtlMs: number;
  /** How long a worker counts as live after its last heartbeat (ms). */
  readonly workerTtlMs: number;
}

function parse<T>(schema: z.ZodType<T>, raw: string | null | undefined): T | undefined {
  if (raw === null || raw === undefined) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** `entry` with `tool` served now: its version first, the rest newest first, at most MAX_VERSIONS. */
export function withVersion(
  entry: ToolCatalogEntry | undefined,
  tool: CustomToolInfo,
  now: number,
): ToolCatalogEntry {
  const served: ToolVersion = {
    version: tool.version,
    schemaHash: tool.schemaHash,
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema,
    seenAt: now,
  };
  const others = (entry?.versions ?? []).filter(
    (v) => !(v.version === tool.version && v.schemaHash === tool.schemaHash),
  );
  const versions = [served, ...others.sort((a, b) => b.seenAt - a.seenAt)].slice(0, MAX_VERSIONS);
  // The definition shown is the newest one any worker served.
  return { tool, versions, seenAt: now };
}

export class ToolCatalogStore {
  readonly keys: ToolCatalogKeys;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: ToolCatalogStoreOptions,
  ) {
    this.keys = toolCatalogKeys(options.prefix);
  }

  /**
   * Records that `workerId` serves `tools` on `queues` now (its first publication and every
   * heartbeat), drops workers whose heartbeat ran out and tools not served for the TTL. True when
   * a tool or a version is new (or one went): the change is published so every reader reloads.
   */
  async beat(
    workerId: string,
    queues: readonly string[],
    tools: readonly CustomToolInfo[],
  ): Promise<boolean> {
    const now = Date.now();
    const { keys } = this;
    const names = tools.map((t) => t.name);
    const current = names.length > 0 ? await this.redis.hmget(keys.tools, ...names) : [];
    let changed = false;
    const multi = slotMulti(this.redis);
    tools.forEach((tool, i) => {
      const before = parse(ToolCatalogEntry, current[i]);
      if (!before?.versions.some((v) => v.version === tool.version && v.schemaHash === tool.schemaHash))
        changed = true;
      multi.hset(keys.tools, tool.name, JSON.stringify(withVersion(before, tool, now)));
    });
    const worker: ToolWorkerEntry = {
      workerId,
      queues: [...queues],
      tools: tools.map((t) => ({
        name: t.name,
        version: t.version,
        schemaHash: t.schemaHash,
        queue: t.queue,
      })),
      beatAt: now,
    };
    multi.hset(keys.workers, workerId, JSON.stringify(worker));
    multi.zadd(keys.beats, now + this.options.workerTtlMs, workerId);
    // Every beat pushes the keys' expiry out: once no worker beats any more, they go when the
    // last tool's TTL has run out, with nothing left to prune them.
    for (const key of [keys.tools, keys.workers, keys.beats]) multi.pexpire(key, this.options.catalogTtlMs);
    await multi.exec();
    if ((await this.prune(now)) || changed) await this.redis.publish(keys.channel, workerId);
    return changed;
  }

  /** A worker stopping: its entry goes now, not when its heartbeat runs out. */
  async leave(workerId: string): Promise<void> {
    await slotMulti(this.redis).hdel(this.keys.workers, workerId).zrem(this.keys.beats, workerId).exec();
    await this.redis.publish(this.keys.channel, workerId);
  }

  /** Drops dead workers and tools unseen for the TTL; true when a tool went. */
  private async prune(now: number): Promise<boolean> {
    const { keys } = this;
    const dead = await this.redis.zrangebyscore(keys.beats, '-inf', now);
    if (dead.length > 0)
      await slotMulti(this.redis)
        .hdel(keys.workers, ...dead)
        .zrem(keys.beats, ...dead)
        .exec();
    const all = await this.redis.hgetall(keys.tools);
    const stale = Object.entries(all)
      .filter(([, raw]) => (parse(ToolCatalogEntry, raw)?.seenAt ?? 0) < now - this.options.catalogTtlMs)
      .map(([name]) => name);
    if (stale.length > 0) await this.redis.hdel(keys.tools, ...stale);
    return stale.length > 0;
  }

  /** The tools known now (served within the TTL) and the workers alive now. */
  async read(): Promise<ToolCatalogSnapshot> {
    const now = Date.now();
    const { keys } = this;
    const [rawTools, rawWorkers, live] = await Promise.all([
      this.redis.hgetall(keys.tools),
      this.redis.hgetall(keys.workers),
      this.redis.zrangebyscore(keys.beats, now, '+inf'),
    ]);
    const tools = new Map<string, ToolCatalogEntry>();
    for (const [name, raw] of Object.entries(rawTools)) {
      const entry = parse(ToolCatalogEntry, raw);
      if (entry && entry.seenAt >= now - this.options.catalogTtlMs) tools.set(name, entry);
    }
    const alive = new Set(live);
    const workers = Object.values(rawWorkers)
      .map((raw) => parse(ToolWorkerEntry, raw))
      .filter((w): w is ToolWorkerEntry => w !== undefined && alive.has(w.workerId));
    return { tools, workers };
  }
}
