/**
 * The Redis side of accept durability (`accept-durability.ts` holds the rules): before `POST
 * /v1/runs` answers, `confirm()` waits until replicas acknowledged (`WAIT`) and/or the primary
 * fsynced (`WAITAOF`) every write made so far.
 *
 * `WAIT` and `WAITAOF` block the connection they are sent on and cover that connection's writes
 * only. So the barrier has a connection of its own (the API's shared one keeps serving other
 * requests while a wait blocks), and each round first writes `acceptBarrierKey` on it: the
 * replication offset of that write is past every write that completed before it, on any
 * connection, so the wait that follows covers them. Rounds are shared: a `confirm()` joins the next
 * round that starts after it was called, so concurrent accepts wait together, one round at a time,
 * rather than queueing one wait each behind a blocked connection.
 */
import type { Cluster, Redis } from 'ioredis';
import { isCluster, mastersOf, whenReady, type RedisClient } from '../runtime/redis.js';
import { keySlot } from '../state/key-slot.js';
import { acceptBarrierKey } from '../state/keys.js';
import {
  durabilityRefusal,
  shortfallOf,
  waitsForDurability,
  type AcceptAcks,
  type AcceptDurability,
  type AcceptShortfall,
  type RedisServerFacts,
} from './accept-durability.js';

/** The Redis at REDIS_URL cannot give the durability asked for; the API does not start. */
export class AcceptDurabilityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AcceptDurabilityError';
  }
}

/** The barrier key outlives a round by far; it only has to exist while a wait is on. */
const BARRIER_TTL_MS = 60_000;

/** A field of `INFO` output (`name:value` lines), or undefined. */
export function infoField(info: string, name: string): string | undefined {
  const line = info.split(/\r?\n/).find((l) => l.startsWith(`${name}:`));
  return line?.slice(name.length + 1).trim();
}

/**
 * The server's version and whether its AOF is on; of a Redis Cluster, the lowest version among its
 * masters and whether every one has its AOF on.
 */
export async function redisServerFacts(redis: RedisClient): Promise<RedisServerFacts> {
  const facts = await Promise.all(
    mastersOf(redis).map(async (node) => {
      const [server, persistence] = await Promise.all([node.info('server'), node.info('persistence')]);
      return {
        version: infoField(server, 'redis_version') ?? 'unknown',
        aofEnabled: infoField(persistence, 'aof_enabled') === '1',
      };
    }),
  );
  const [lowest] = [...facts].sort((a, b) => compareVersions(a.version, b.version));
  return { version: lowest!.version, aofEnabled: facts.every((f) => f.aofEnabled) };
}

/** Orders dotted versions numerically (`7.0.15` before `7.2.0`). */
function compareVersions(a: string, b: string): number {
  const [x, y] = [a.split('.').map(Number), b.split('.').map(Number)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export class AcceptBarrier {
  private running: Promise<AcceptAcks> | undefined;
  private next: Promise<AcceptAcks> | undefined;

  private constructor(
    /** A connection of the barrier's own: waits block it. */
    private readonly redis: RedisClient,
    private readonly prefix: string,
    readonly durability: AcceptDurability,
  ) {}

  /**
   * A barrier on `redis` (a connection nothing else uses), after checking that the server can give
   * `durability` (AcceptDurabilityError when not; `redis` is then left to the caller to close).
   * Undefined when `durability` waits for nothing.
   */
  static async open(
    redis: RedisClient,
    prefix: string,
    durability: AcceptDurability,
  ): Promise<AcceptBarrier | undefined> {
    if (!waitsForDurability(durability)) return undefined;
    if (durability.waitAof !== 'off') {
      // Whether the server has WAITAOF is known only by asking it, so this waits for Redis.
      const facts = await whenReady(redis)
        .then(() => redisServerFacts(redis))
        .catch((err: Error) => {
          throw new AcceptDurabilityError(
            `TETRALOOP_ACCEPT_WAITAOF=${durability.waitAof}: cannot read the version of the Redis at REDIS_URL (${err.message})`,
          );
        });
      const refused = durabilityRefusal(durability, facts);
      if (refused) throw new AcceptDurabilityError(refused);
    }
    return new AcceptBarrier(redis, prefix, durability);
  }

  /**
   * Waits until every write made before this call is as durable as asked, at most `waitMs` per
   * wait; answers what is left unconfirmed, or undefined. Rejects when Redis cannot be reached.
   */
  async confirm(): Promise<AcceptShortfall | undefined> {
    return shortfallOf(this.durability, await this.joinRound());
  }

  private joinRound(): Promise<AcceptAcks> {
    if (!this.running) return this.startRound();
    // The round in flight may have written its barrier before our writes: wait for the next one.
    this.next ??= this.running
      .catch(() => undefined)
      .then(() => {
        this.next = undefined;
        return this.startRound();
      });
    return this.next;
  }

  private startRound(): Promise<AcceptAcks> {
    const round = this.round().finally(() => {
      if (this.running === round) this.running = undefined;
    });
    this.running = round;
    return round;
  }

  /**
   * One round on every master: a run's writes are on its own slot's master, so on a Redis Cluster
   * each master writes a barrier key of its own slots (through its own connection) and waits; the
   * round answers the fewest replicas any master reached and whether every AOF took its barrier.
   */
  private async round(): Promise<AcceptAcks> {
    if (!isCluster(this.redis)) return this.roundOn(this.redis, acceptBarrierKey(this.prefix));
    const cluster = this.redis;
    const acks = await Promise.all(
      cluster.nodes('master').map((node) => this.roundOn(node, this.barrierKeyOn(cluster, node))),
    );
    return {
      replicas: acks.some((a) => a.replicas === null) ? null : Math.min(...acks.map((a) => a.replicas!)),
      aofLocal: acks.some((a) => a.aofLocal === null) ? null : acks.every((a) => a.aofLocal),
    };
  }

  /** A barrier key whose slot `node` serves: the base key with the first hash tag that lands there. */
  private barrierKeyOn(cluster: Cluster, node: Redis): string {
    const where = `${node.options.host}:${node.options.port}`;
    for (let i = 0; i < 100_000; i++) {
      const key = `${acceptBarrierKey(this.prefix)}:{${i}}`;
      if (cluster.slots[keySlot(key)]?.includes(where)) return key;
    }
    throw new Error(`no barrier key found for the master at ${where}`);
  }

  private async roundOn(redis: RedisClient, key: string): Promise<AcceptAcks> {
    const { replicas, waitAof, waitMs } = this.durability;
    // One pipeline: the barrier write, then the waits, each covering it.
    const pipeline = redis.pipeline().set(key, String(Date.now()), 'PX', BARRIER_TTL_MS);
    if (replicas > 0) pipeline.call('WAIT', replicas, waitMs);
    if (waitAof !== 'off') pipeline.call('WAITAOF', 1, 0, waitMs);
    const replies = (await pipeline.exec()) ?? [];
    const values = replies.map(([err, value]) => {
      if (err) throw err;
      return value;
    });
    let i = 1;
    const acked = replicas > 0 ? Number(values[i++]) : null;
    const aof = waitAof !== 'off' ? (values[i] as [number, number] | undefined) : undefined;
    return { replicas: acked, aofLocal: aof === undefined ? null : Number(aof[0]) >= 1 };
  }
}
