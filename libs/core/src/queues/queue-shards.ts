/**
 * Where BullMQ keeps each queue, and which shard a run's jobs go to. Pure: names and hashes only.
 *
 * One BullMQ queue lives in one Redis Cluster slot (its keys share the hash tag of its prefix), so
 * on a cluster one `tool` queue is bound to one master. `TETRALOOP_QUEUE_SHARDS=N` splits the run
 * queues (`plan` and `tool`) into N shards; a run's root job (in `plan`) and its node jobs (in
 * `tool`) are parent and children of one BullMQ flow, so both queues of a shard share one hash tag.
 * Each shard's tag is chosen so its slot falls in the shard's own Nth of the slot range: on a
 * cluster whose masters hold even, contiguous ranges (what `redis-cli --cluster create` makes), N
 * shards over N masters put one shard on each.
 *
 * On one Redis with one shard nothing changes: every queue keeps the bare prefix, as before.
 */
import { SLOT_COUNT, keySlot } from '../state/key-slot.js';

export interface QueueLayout {
  /** BullMQ prefix of the `sense` queue. */
  readonly sense: string;
  /** BullMQ prefix of the `reflect` queue. */
  readonly reflect: string;
  /** BullMQ prefix of each shard's `plan` and `tool` queues, by shard. */
  readonly shards: readonly string[];
}

/** The hash tag of shard `index` of `count`: `<prefix>-<index>`, or `<prefix>-<index>.<n>` for the first n that lands in the shard's range. */
export function shardTag(prefix: string, index: number, count: number): string {
  const low = Math.floor((index * SLOT_COUNT) / count);
  const high = Math.floor(((index + 1) * SLOT_COUNT) / count);
  for (let n = 0; ; n++) {
    const tag = n === 0 ? `${prefix}-${index}` : `${prefix}-${index}.${n}`;
    const slot = keySlot(tag);
    if (slot >= low && slot < high) return tag;
  }
}

export function queueLayout(prefix: string, options: { clustered: boolean; shards: number }): QueueLayout {
  const { clustered, shards } = options;
  // A hash tag in the prefix would put every key of the deployment in one slot.
  if (clustered && /[{}]/.test(prefix)) {
    throw new Error(`TETRALOOP_PREFIX "${prefix}" has a { or }: on a Redis Cluster it must have none`);
  }
  if (!clustered && shards === 1) return { sense: prefix, reflect: prefix, shards: [prefix] };
  const tagged = (tag: string): string => `${prefix}:{${tag}}`;
  return {
    sense: clustered ? tagged(`${prefix}-sense`) : prefix,
    reflect: clustered ? tagged(`${prefix}-reflect`) : prefix,
    shards: Array.from({ length: shards }, (_, i) => tagged(shardTag(prefix, i, shards))),
  };
}

/**
 * The shard of a run made by a request (not a child run, which goes where its parent is): spread
 * evenly by a hash of its id.
 */
export const shardOfRunId = (runId: string, shards: number): number =>
  shards === 1 ? 0 : keySlot(runId) % shards;
