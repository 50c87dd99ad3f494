/**
 * Reads a tenant's run search indexes (sorted sets of run ids by creation time, kept by the run
 * scripts: `run.lib.lua`) and the listings of the runs found. A search walks the smallest index
 * among its filters newest first, from its cursor, checks each run's own fields against the other
 * filters, and stops at a page, the end, or a bound on the runs it looks at. Entries whose run is
 * gone (expired before the index was next trimmed) are dropped as they are met.
 */
import type { Redis } from 'ioredis';
import type { RunListing } from '../domain/run-model.js';
import {
  LISTING_COUNTERS,
  listingOf,
  matchesSearch,
  searchFilters,
  type RunCursor,
  type RunSearch,
  type SearchFilter,
} from '../insight/run-search.js';
import { runKeys, runSearchKeys, type RunSearchKeys } from './keys.js';

/** Most runs one search looks at before it answers what it found, with a cursor to go on from. */
export const RUN_SEARCH_SCAN_MAX = 5000;

export interface RunSearchPage {
  readonly runs: RunListing[];
  /** Where the next page starts; null when the search has nothing after this page. */
  readonly nextCursor: RunCursor | null;
}

interface Entry {
  readonly runId: string;
  readonly score: number;
}

const keyOf = (keys: RunSearchKeys, filter: SearchFilter): string => {
  switch (filter.kind) {
    case 'status':
      return keys.status(filter.value);
    case 'agent':
      return keys.agent(filter.value);
    case 'session':
      return keys.session(filter.value);
    case 'tag':
      return keys.tag(filter.value);
  }
};

/** The replies of a MULTI, in order; the first failed command's error is thrown. */
function replies(raw: [Error | null, unknown][] | null): unknown[] {
  return (raw ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

const META_FIELDS = [
  'status',
  'agentId',
  'sessionKey',
  'task',
  'createdAt',
  'startedAt',
  'finishedAt',
  'nodeCount',
  'tags',
  'rerunOf',
] as const;

export class RunIndex {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly scanMax = RUN_SEARCH_SCAN_MAX,
  ) {}

  /** One page of the tenant's runs that pass every filter of `search`, newest first. */
  async search(tenant: string, search: RunSearch): Promise<RunSearchPage> {
    const keys = runSearchKeys(this.prefix, tenant);
    const key = await this.smallest(keys, search);
    const min = search.since ?? -Infinity;
    const max = search.until ?? Infinity;
    const found: Entry[] = [];
    const gone: string[] = [];
    let after: RunCursor | null = search.cursor ?? null;
    let examined = 0;
    let exhausted = false;
    // One more than a page: whether a next page exists is known without asking again.
    while (found.length <= search.limit && examined < this.scanMax) {
      const batch = await this.after(key, min, max, after, Math.min(500, (search.limit + 1) * 2));
      if (batch.length === 0) {
        exhausted = true;
        break;
      }
      const fields = replies(
        await batch
          .reduce(
            (tx, e) =>
              tx.hmget(runKeys(this.prefix, e.runId).meta, 'status', 'agentId', 'sessionKey', 'tags'),
            this.redis.multi(),
          )
          .exec(),
      ) as (string | null)[][];
      for (const [i, entry] of batch.entries()) {
        const [status = null, agentId = null, sessionKey = null, tags = null] = fields[i] ?? [];
        examined += 1;
        after = entry;
        if (status === null) gone.push(entry.runId);
        else if (matchesSearch(search, { status, agentId, sessionKey, tags })) found.push(entry);
        if (found.length > search.limit || examined >= this.scanMax) break;
      }
    }
    if (gone.length > 0) await this.redis.zrem(key, ...gone);
    const page = found.slice(0, search.limit);
    const nextCursor =
      found.length > search.limit ? page.at(-1)! : exhausted || after === null ? null : after;
    return { runs: await this.listings(page.map((e) => e.runId)), nextCursor };
  }

  /** The listings of these runs, in this order; a run that is gone is left out. */
  async listings(runIds: readonly string[]): Promise<RunListing[]> {
    if (runIds.length === 0) return [];
    const tx = this.redis.multi();
    for (const runId of runIds) {
      const k = runKeys(this.prefix, runId);
      tx.hmget(k.meta, ...META_FIELDS).hmget(k.aux, ...LISTING_COUNTERS);
    }
    const all = replies(await tx.exec()) as (string | null)[][];
    return runIds.flatMap((runId, i) => {
      const meta = all[2 * i] ?? [];
      const aux = all[2 * i + 1] ?? [];
      const field = (name: (typeof META_FIELDS)[number]): string | null =>
        meta[META_FIELDS.indexOf(name)] ?? null;
      const listing = listingOf(runId, {
        status: field('status'),
        agentId: field('agentId'),
        sessionKey: field('sessionKey'),
        task: field('task'),
        createdAt: field('createdAt'),
        startedAt: field('startedAt'),
        finishedAt: field('finishedAt'),
        nodeCount: field('nodeCount'),
        tags: field('tags'),
        rerunOf: field('rerunOf'),
        counters: Object.fromEntries(LISTING_COUNTERS.map((name, j) => [name, aux[j] ?? null])),
      });
      return listing ? [listing] : [];
    });
  }

  /** The index to walk: the one filter's, the smallest of several within the time bounds, or all runs. */
  private async smallest(keys: RunSearchKeys, search: RunSearch): Promise<string> {
    const candidates = searchFilters(search).map((f) => keyOf(keys, f));
    if (candidates.length === 0) return keys.all;
    if (candidates.length === 1) return candidates[0]!;
    const min = search.since ?? '-inf';
    const max = search.until ?? '+inf';
    const counts = replies(
      await candidates.reduce((tx, key) => tx.zcount(key, min, max), this.redis.multi()).exec(),
    ) as number[];
    let best = 0;
    counts.forEach((count, i) => {
      if (count < counts[best]!) best = i;
    });
    return candidates[best]!;
  }

  /**
   * Up to `count` entries of `key` with scores in [min, max] that come after `cursor` in the
   * search's order (score descending, then id descending: how Redis orders a reversed range).
   * Runs created in the same millisecond as the cursor's are read apart, so a page never skips or
   * repeats one.
   */
  private async after(
    key: string,
    min: number,
    max: number,
    cursor: RunCursor | null,
    count: number,
  ): Promise<Entry[]> {
    const entries: Entry[] = [];
    let top = bound(max, false);
    if (cursor !== null) {
      if (cursor.score < min) return [];
      if (cursor.score <= max) {
        const ties = await this.redis.zrangebyscore(key, cursor.score, cursor.score);
        entries.push(
          ...ties
            .filter((id) => id < cursor.runId)
            .sort()
            .reverse()
            .slice(0, count)
            .map((runId) => ({ runId, score: cursor.score })),
        );
      }
      if (cursor.score <= max) top = bound(cursor.score, true);
    }
    if (entries.length >= count) return entries;
    const rest = await this.redis.zrange(
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
    for (let i = 0; i + 1 < rest.length; i += 2) {
      entries.push({ runId: rest[i]!, score: Number(rest[i + 1]) });
    }
    return entries;
  }
}

/** A score bound for ZRANGE BYSCORE: infinities as Redis writes them, `(` for an exclusive one. */
function bound(score: number, exclusive: boolean): string {
  if (score === Infinity) return '+inf';
  if (score === -Infinity) return '-inf';
  return `${exclusive ? '(' : ''}${score}`;
}
