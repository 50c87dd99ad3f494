/**
 * Searching a tenant's runs, pure: what a search asks for, the cursor that pages it, the time
 * bounds it takes (`2026-11-30T05:00:00Z` or `1h` ago), the filter a candidate must pass, and the
 * listing of a run built from its stored fields. The Redis side (`state/run-index.ts`) reads the
 * indexes the run scripts keep and hands the fields here.
 */
import { usdFromNano } from '../cost/price-table.js';
import { RunStatus, type RerunOf, type RunListing, type RunUsage } from '../domain/run-model.js';
import { decodeCursor, type IndexCursor } from './index-cursor.js';

/** Runs a search answers when it names no `limit`. */
export const RUN_SEARCH_DEFAULT_LIMIT = 50;
/** Most runs one page may hold. */
export const RUN_SEARCH_MAX_LIMIT = 200;
/** Characters of a task a listing shows. */
export const LISTING_TASK_CHARS = 200;

/** A search of one tenant's runs, newest first. Every filter given must hold. */
export interface RunSearch {
  readonly status?: RunStatus;
  readonly agentId?: string;
  /** As stored (tenant-scoped). */
  readonly sessionKey?: string;
  readonly tag?: string;
  readonly scheduleId?: string;
  readonly triggerId?: string;
  /** Created at or after (epoch ms). */
  readonly since?: number;
  /** Created at or before (epoch ms). */
  readonly until?: number;
  readonly limit: number;
  /** Continue after this run (its creation time and id: the previous page's `nextCursor`). */
  readonly cursor?: IndexCursor;
}

/** A filter of a search that has an index of its own. */
export type SearchFilter =
  | { readonly kind: 'status'; readonly value: RunStatus }
  | { readonly kind: 'agent'; readonly value: string }
  | { readonly kind: 'session'; readonly value: string }
  | { readonly kind: 'tag'; readonly value: string }
  | { readonly kind: 'schedule'; readonly value: string }
  | { readonly kind: 'trigger'; readonly value: string };

/** The filters of a search, each answered by an index (the time bounds are the indexes' scores). */
export function searchFilters(search: RunSearch): SearchFilter[] {
  return [
    ...(search.status ? [{ kind: 'status' as const, value: search.status }] : []),
    ...(search.agentId ? [{ kind: 'agent' as const, value: search.agentId }] : []),
    ...(search.sessionKey ? [{ kind: 'session' as const, value: search.sessionKey }] : []),
    ...(search.tag ? [{ kind: 'tag' as const, value: search.tag }] : []),
    ...(search.scheduleId ? [{ kind: 'schedule' as const, value: search.scheduleId }] : []),
    ...(search.triggerId ? [{ kind: 'trigger' as const, value: search.triggerId }] : []),
  ];
}

/** The fields of a run a candidate is checked on: read from its hash. */
export interface CandidateFields {
  readonly status: string | null;
  readonly agentId: string | null;
  readonly sessionKey: string | null;
  /** JSON array, as stored. */
  readonly tags: string | null;
  readonly scheduleId?: string | null;
  readonly triggerId?: string | null;
}

/**
 * Whether a run read back passes every filter: the index a candidate came from answers one filter,
 * and its own fields the others. A run whose hash is gone (expired) passes none.
 */
export function matchesSearch(search: RunSearch, fields: CandidateFields): boolean {
  if (fields.status === null) return false;
  if (search.status && fields.status !== search.status) return false;
  if (search.agentId && fields.agentId !== search.agentId) return false;
  if (search.sessionKey && fields.sessionKey !== search.sessionKey) return false;
  if (search.tag && !parseTags(fields.tags).includes(search.tag)) return false;
  if (search.scheduleId && fields.scheduleId !== search.scheduleId) return false;
  if (search.triggerId && fields.triggerId !== search.triggerId) return false;
  return true;
}

const parseTags = (raw: string | null): string[] => (raw ? (JSON.parse(raw) as string[]) : []);

/** The cursor of a page of runs `text` stands for (`nextCursor`), or undefined. */
export const decodeRunCursor = (text: string): IndexCursor | undefined =>
  decodeCursor(text, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d{1,6})(s|m|h|d)$/;
/** An ISO 8601 time with a date, a time and a zone: `2026-11-30T05:00:00Z`, `…+02:00`. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A time bound of a search as epoch ms: an ISO time (`2026-11-30T05:00:00Z`), or a duration before
 * `now` (`90s`, `15m`, `1h`, `7d`). Undefined for anything else.
 */
export function parseTimeBound(text: string, now: number): number | undefined {
  const duration = DURATION.exec(text);
  if (duration) return now - Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS];
  if (!ISO_TIME.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : at;
}

/** A run's fields as its hashes hold them: what a listing is made of. */
export interface ListingFields {
  readonly status: string | null;
  readonly agentId: string | null;
  readonly sessionKey: string | null;
  readonly task: string | null;
  readonly createdAt: string | null;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
  readonly nodeCount: string | null;
  readonly tags: string | null;
  readonly rerunOf: string | null;
  readonly scheduleId?: string | null;
  readonly triggerId?: string | null;
  /** `count:<status>` and `usage:<counter>` of the run's aux hash, by those names. */
  readonly counters: Readonly<Record<string, string | null>>;
}

/** A run's usage from its aux hash's `usage:<counter>` fields, read by `counter`. */
export function usageFromCounters(counter: (field: string) => number): RunUsage {
  const n = (name: string): number => counter(`usage:${name}`);
  return {
    toolCalls: n('toolCalls'),
    toolTimeMs: n('toolTimeMs'),
    promptTokens: n('promptTokens'),
    completionTokens: n('completionTokens'),
    totalTokens: n('promptTokens') + n('completionTokens'),
    modelCalls: n('modelCalls'),
    costUsd: usdFromNano(n('costNanoUsd')),
    unpricedModelCalls: n('unpricedModelCalls'),
  };
}

/** The listing of a run from its stored fields; null for a run whose hash is gone. */
export function listingOf(runId: string, fields: ListingFields): RunListing | null {
  const status = RunStatus.safeParse(fields.status);
  if (!status.success || fields.createdAt === null) return null;
  const n = (name: string): number => Number(fields.counters[name] ?? 0);
  const usage = usageFromCounters(n);
  const from = fields.startedAt ?? fields.createdAt;
  return {
    runId,
    status: status.data,
    agentId: fields.agentId ?? 'main',
    sessionKey: fields.sessionKey,
    task: fields.task === null ? null : fields.task.slice(0, LISTING_TASK_CHARS),
    createdAt: fields.createdAt,
    startedAt: fields.startedAt,
    finishedAt: fields.finishedAt,
    durationMs:
      fields.finishedAt === null ? null : Math.max(0, Date.parse(fields.finishedAt) - Date.parse(from)),
    nodes: {
      total: Number(fields.nodeCount ?? 0),
      succeeded: n('count:succeeded'),
      failed: n('count:failed'),
    },
    usage,
    tags: parseTags(fields.tags),
    rerunOf: fields.rerunOf ? (JSON.parse(fields.rerunOf) as RerunOf) : null,
    scheduleId: fields.scheduleId ?? null,
    triggerId: fields.triggerId ?? null,
  };
}

/** The counters of the aux hash a listing reads, in the order `listingOf` takes them. */
export const LISTING_COUNTERS = [
  'count:succeeded',
  'count:failed',
  'usage:toolCalls',
  'usage:toolTimeMs',
  'usage:promptTokens',
  'usage:completionTokens',
  'usage:modelCalls',
  'usage:costNanoUsd',
  'usage:unpricedModelCalls',
] as const;
