/**
 * A `MULTI` whose commands may name keys of different Redis Cluster slots: on one Redis it is one
 * `MULTI` (atomic, one round trip, as before); on a cluster the commands are grouped by the slot
 * of their key (each command's first argument) and each group is one `MULTI` on its slot, sent at
 * once, so every group is atomic but the groups are not atomic together. For reads of several
 * runs or sessions and for writes whose parts are each safe alone; a change that must be atomic
 * keeps its keys under one hash tag instead.
 */
import type { ChainableCommander } from 'ioredis';
import { isCluster, type RedisClient } from './redis-client.js';
import { keySlot } from './key-slot.js';

/** The replies of `exec`, in the order the commands were given, as ioredis answers a MULTI. */
export type MultiReplies = [Error | null, unknown][];

type Command = { readonly name: string; readonly args: readonly unknown[] };

/**
 * Typed as ioredis' MULTI: on a cluster only commands whose first argument is their key may be
 * given (every command Tetraloop batches is one), and `exec` never answers null.
 */
export type SlotMulti = ChainableCommander;

export function slotMulti(redis: RedisClient): SlotMulti {
  return isCluster(redis) ? bySlot(redis, 'multi') : redis.multi();
}

/** A pipeline alike: one on one Redis; on a cluster, one pipeline per slot, sent at once. */
export function slotPipeline(redis: RedisClient): SlotMulti {
  return isCluster(redis) ? bySlot(redis, 'pipeline') : redis.pipeline();
}

function bySlot(redis: RedisClient, kind: 'multi' | 'pipeline'): SlotMulti {
  const commands: Command[] = [];
  const proxy: SlotMulti = new Proxy({} as SlotMulti, {
    get(_, name: string) {
      if (name === 'exec') return () => execBySlot(redis, kind, commands);
      if (name === 'then') return undefined;
      return (...args: unknown[]) => {
        commands.push({ name, args });
        return proxy;
      };
    },
  });
  return proxy;
}

async function execBySlot(
  redis: RedisClient,
  kind: 'multi' | 'pipeline',
  commands: readonly Command[],
): Promise<MultiReplies> {
  const groups = new Map<number, number[]>();
  commands.forEach((c, i) => {
    const slot = keySlot(String(c.args[0]));
    groups.set(slot, [...(groups.get(slot) ?? []), i]);
  });
  const replies: MultiReplies = new Array<[Error | null, unknown]>(commands.length);
  await Promise.all(
    [...groups.values()].map(async (indexes) => {
      const tx = redis[kind]() as unknown as Record<string, (...a: unknown[]) => unknown> &
        ChainableCommander;
      for (const i of indexes) tx[commands[i]!.name]!(...commands[i]!.args);
      const answers = (await tx.exec()) ?? [];
      indexes.forEach((i, j) => (replies[i] = answers[j] ?? [new Error('no reply'), null]));
    }),
  );
  return replies;
}
