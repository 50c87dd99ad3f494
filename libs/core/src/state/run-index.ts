/**
 * Reads a tenant's run search indexes (sorted sets of run ids by creation time, kept by the run
 * scripts: `run.lib.lua`) and the listings of the runs found. A search walks the smallest index
 * among its filters newest first, from its cursor, checks each run's own fields against the other
 * filters, and stops at a page, the end, or a bound on the runs it looks at. Entries whose run is
 * gone (expired before the index was next trimmed) are dropped as they are met.
 */
import type { RedisClient } from './redis-client.js';
import type { RunListing } from '../domain/run-model.js';
import {
  LISTING_COUNTERS,
  listingOf,
  matchesSearch,
  searchFilters,
  type RunSearch,
  type SearchFilter,
} from '../insight/run-search.js';
import type { IndexCursor } from '../insight/index-cursor.js';
import { runKeys, runSearchKeys, type RunSearchKeys } from './keys.js';
import { entriesAfter } from './sorted-page.js';
import { slotMulti } from './slot-multi.js';

/** Most runs one search looks at before it answers what it found, with a cursor to go on from. */
export const RUN_SEARCH_SCAN_MAX = 5000;

export interface RunSearchPage {
  readonly runs: RunListing[];
  /** Where the next page starts; null when the search has nothing after this page. */
  readonly nextCursor: IndexCursor | null;
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
    case 'schedule':
      return keys.schedule(filter.value);
    case 'trigger':
      return keys.trigger(filter.value);
  }
};

/** The replies of a MULTI, in order; the first failed command's error is thrown. */
function replies(raw: [Error | null, unknown][] | null): unknown[] {
  return (raw ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

/** The fields a candidate is checked on, in the order `search` reads them. */
const CANDIDATE_FIELDS = ['status', 'agentId', 'sessionKey', 'tags', 'scheduleId', 'triggerId'] as const;

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
  'scheduleId',
  'triggerId',
] as const;

export class RunIndex {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly scanMax = RUN_SEARCH_SCAN_MAX,
  ) {}

  /** One page of the tenant's runs that pass every filter of `search`, newest first. */
  async search(tenant: string, search: RunSearch): Promise<RunSearchPage> {
    const keys = runSearchKeys(this.prefix, tenant);
    const key = await this.smallest(keys, search);
    const min = search.since ?? -Infinity;
    const max = search.until ?? Infinity;
    const found: IndexCursor[] = [];
    const gone: string[] = [];
    let after: IndexCursor | null = search.cursor ?? null;
    let examined = 0;
    let exhausted = false;
    // One more than a page: whether a next page exists is known without asking again.
    while (found.length <= search.limit && examined < this.scanMax) {
      const batch = await entriesAfter(
        this.redis,
        key,
        { min, max },
        after,
        Math.min(500, (search.limit + 1) * 2),
      );
      if (batch.length === 0) {
        exhausted = true;
        break;
      }
      const fields = replies(
        await batch
          .reduce(
            (tx, e) => tx.hmget(runKeys(this.prefix, e.id).meta, ...CANDIDATE_FIELDS),
            slotMulti(this.redis),
          )
          .exec(),
      ) as (string | null)[][];
      for (const [i, entry] of batch.entries()) {
        const [
          status = null,
          agentId = null,
          sessionKey = null,
          tags = null,
          scheduleId = null,
          triggerId = null,
        ] = fields[i] ?? [];
        examined += 1;
        after = entry;
        if (status === null) gone.push(entry.id);
        else if (matchesSearch(search, { status, agentId, sessionKey, tags, scheduleId, triggerId }))
          found.push(entry);
        if (found.length > search.limit || examined >= this.scanMax) break;
      }
    }
    if (gone.length > 0) await this.redis.zrem(key, ...gone);
    const page = found.slice(0, search.limit);
    const nextCursor =
      found.length > search.limit ? page.at(-1)! : exhausted || after === null ? null : after;
    return { runs: await this.listings(page.map((e) => e.id)), nextCursor };
  }

  /** The listings of these runs, in this order; a run that is gone is left out. */
  async listings(runIds: readonly string[]): Promise<RunListing[]> {
    if (runIds.length === 0) return [];
    const tx = slotMulti(this.redis);
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
        scheduleId: field('scheduleId'),
        triggerId: field('triggerId'),
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
      await candidates.reduce((tx, key) => tx.zcount(key, min, max), slotMulti(this.redis)).exec(),
    ) as number[];
    let best = 0;
    counts.forEach((count, i) => {
      if (count < counts[best]!) best = i;
    });
    return candidates[best]!;
  }
}
