/**
 * Reading a sorted-set index newest first, a page at a time: the entries after a cursor in the
 * order of a reversed range (score descending, then member descending). Entries that share the
 * cursor's score are read apart, so a page never skips or repeats one, however many share it.
 */
import type { RedisClient } from './redis-client.js';
import type { IndexCursor } from '../insight/index-cursor.js';

/**
 * Up to `count` entries of `key` with scores in [min, max] (infinities for no bound) that come
 * after `cursor` (from the newest without one).
 */
export async function entriesAfter(
  redis: RedisClient,
  key: string,
  bounds: { readonly min: number; readonly max: number },
  cursor: IndexCursor | null,
  count: number,
): Promise<IndexCursor[]> {
  const { min, max } = bounds;
  const entries: IndexCursor[] = [];
  let top = bound(max, false);
  if (cursor !== null) {
    if (cursor.score < min) return [];
    if (cursor.score <= max) {
      const ties = await redis.zrangebyscore(key, cursor.score, cursor.score);
      entries.push(
        ...ties
          .filter((id) => id < cursor.id)
          .sort()
          .reverse()
          .slice(0, count)
          .map((id) => ({ id, score: cursor.score })),
      );
      top = bound(cursor.score, true);
    }
  }
  if (entries.length >= count) return entries;
  const rest = await redis.zrange(
    key,
    top,
    bound(min, false),
    'BYSCORE',
    'REV',
    'LIMIT',
    0,
    count - entries.length,
    'WITHSCORES',
  );
  for (let i = 0; i + 1 < rest.length; i += 2) entries.push({ id: rest[i]!, score: Number(rest[i + 1]) });
  return entries;
}

/** A score bound for ZRANGE BYSCORE: infinities as Redis writes them, `(` for an exclusive one. */
function bound(score: number, exclusive: boolean): string {
  if (score === Infinity) return '+inf';
  if (score === -Infinity) return '-inf';
  return `${exclusive ? '(' : ''}${score}`;
}
