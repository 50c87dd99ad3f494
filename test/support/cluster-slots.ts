/** Where a key lives on a Redis Cluster, asked of one of its nodes: for the cluster tests. */
import { Redis } from 'ioredis';
import { keySlot } from '@tetraloop/core/state';

/** The `redis://` URL of the master that serves `key`'s slot now, from `CLUSTER SLOTS` of `nodeUrl`. */
export async function slotOwner(nodeUrl: string, key: string): Promise<string> {
  const slot = keySlot(key);
  const probe = new Redis(nodeUrl);
  try {
    const ranges = (await probe.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
    const [, , [host, port]] = ranges.find(([low, high]) => slot >= low && slot <= high)!;
    return `redis://${host}:${port}`;
  } finally {
    probe.disconnect();
  }
}

/** The masters that serve slots now, from `CLUSTER SLOTS` of `nodeUrl`. */
export async function slotOwners(nodeUrl: string): Promise<string[]> {
  const probe = new Redis(nodeUrl);
  try {
    const ranges = (await probe.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
    return [...new Set(ranges.map(([, , [host, port]]) => `redis://${host}:${port}`))];
  } finally {
    probe.disconnect();
  }
}
