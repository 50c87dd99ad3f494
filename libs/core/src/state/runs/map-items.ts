/**
 * A map's items in the run's keys (`lua/map-start-6.lua`, `lua/complete-item-6.lua`): starting an
 * execution of a map's items, completing one item, and reading the items' snapshots. Item `i` of
 * map `m` is stored as the node `m[i]` (map/item-id.ts); no script a run without a map calls
 * touches any of this.
 */
import type { LiveNodeState, MapProgress, NodeSnapshot, UsageCharge } from '../../domain/run-model.js';
import { itemId } from '../../map/item-id.js';
import { chargeJson, snapshotJson, type RunContext } from './run-context.js';

/** An item to enqueue: its index and its value. */
export interface MapItem {
  readonly index: number;
  readonly item: unknown;
}

export interface CompleteItemResult {
  readonly written: boolean;
  readonly status: string | null;
  readonly generation: number;
  /** The next item of the lane, to enqueue. */
  readonly next?: MapItem;
}

/** A map's items as its state holds them: `map.progress`'s figures, with the list's concurrency. */
export interface MapState extends MapProgress {
  readonly concurrency: number;
  /** When this execution of its items started (epoch ms): the map job's first entry, before it parked. */
  readonly startedAt: number | null;
}

/** The `map:<id>` field of a run's `aux` hash, as the scripts write it (JSON). */
export function parseMapState(raw: string): MapState {
  const state = JSON.parse(raw) as Partial<
    Record<'total' | 'c' | 'done' | 'failed' | 'launched' | 'started', number>
  >;
  const done = state.done ?? 0;
  return {
    done,
    failed: state.failed ?? 0,
    running: Math.max(0, (state.launched ?? done) - done),
    total: state.total ?? 0,
    concurrency: state.c ?? 1,
    startedAt: state.started ?? null,
  };
}

const HMGET_CHUNK = 1000;

export class MapItems {
  constructor(private readonly ctx: RunContext) {}

  /** Starts the execution of a map's items (once per generation and fingerprint); answers the lanes' heads. */
  async startMap(
    runId: string,
    mapId: string,
    options: {
      generation: number;
      concurrency: number;
      fingerprint: string;
      stopOnFailure: boolean;
      items: readonly unknown[];
    },
  ): Promise<{ status: string | null; heads: MapItem[] }> {
    const raw = (await this.ctx.script('map-start-6', this.ctx.scriptKeys(runId), [
      mapId,
      options.generation,
      options.concurrency,
      options.fingerprint,
      options.stopOnFailure ? '1' : '0',
      ...options.items.map((item) => JSON.stringify(item ?? null)),
    ])) as unknown[];
    const heads: MapItem[] = [];
    for (let i = 1; i + 1 < raw.length; i += 2) {
      heads.push({ index: Number(raw[i]), item: JSON.parse(String(raw[i + 1])) as unknown });
    }
    return { status: typeof raw[0] === 'string' ? raw[0] : null, heads };
  }

  /** Writes an item's snapshot (once) and answers the next item of its lane. */
  async completeItem(
    runId: string,
    mapId: string,
    index: number,
    snapshot: NodeSnapshot,
    options: { generation: number; charge: UsageCharge },
  ): Promise<CompleteItemResult> {
    const failure =
      snapshot.status === 'failed' && snapshot.error
        ? JSON.stringify({
            index,
            error: { code: snapshot.error.code, message: snapshot.error.message },
            attempts: snapshot.attempts.length,
          })
        : '';
    const raw = (await this.ctx.script('complete-item-6', this.ctx.scriptKeys(runId), [
      mapId,
      index,
      snapshotJson(snapshot),
      options.generation,
      chargeJson(options.charge),
      failure,
    ])) as unknown[];
    const [written, status, generation, next, item] = raw;
    return {
      written: written === 1,
      status: typeof status === 'string' ? status : null,
      generation: Number(generation ?? 0),
      ...(typeof next === 'number' && typeof item === 'string'
        ? { next: { index: next, item: JSON.parse(item) as unknown } }
        : {}),
    };
  }

  /** The snapshots of a map's first `total` items, in item order (undefined where none). */
  async itemSnapshots(runId: string, mapId: string, total: number): Promise<(NodeSnapshot | undefined)[]> {
    const key = this.ctx.keysOf(runId).nodes;
    const out: (NodeSnapshot | undefined)[] = [];
    for (let from = 0; from < total; from += HMGET_CHUNK) {
      const ids = Array.from({ length: Math.min(HMGET_CHUNK, total - from) }, (_, i) =>
        itemId(mapId, from + i),
      );
      const raw = await this.ctx.redis.hmget(key, ...ids);
      for (const s of raw) out.push(s ? (JSON.parse(s) as NodeSnapshot) : undefined);
    }
    return out;
  }

  /**
   * Where a map's current execution of its items stands (the `map:<id>` state the scripts keep):
   * its list's length, concurrency and items done, failed and running; null before it started them.
   */
  async mapState(runId: string, mapId: string): Promise<MapState | null> {
    const raw = await this.ctx.redis.hget(this.ctx.keysOf(runId).aux, `map:${mapId}`);
    return raw ? parseMapState(raw) : null;
  }

  /**
   * One item as `GET /v1/runs/:id/nodes/:nodeId/items/:index` shows it: its snapshot, or its live
   * state while it runs; and how many items its map has (null before the map started them).
   */
  async item(
    runId: string,
    mapId: string,
    index: number,
  ): Promise<{ total: number | null; snapshot: NodeSnapshot | null; live: LiveNodeState | null }> {
    const k = this.ctx.keysOf(runId);
    const id = itemId(mapId, index);
    const [snapshot, live, state] = await Promise.all([
      this.ctx.redis.hget(k.nodes, id),
      this.ctx.redis.hget(k.live, id),
      this.ctx.redis.hget(k.aux, `map:${mapId}`),
    ]);
    const total = state ? parseMapState(state).total : null;
    return {
      total,
      snapshot: snapshot ? (JSON.parse(snapshot) as NodeSnapshot) : null,
      live: live ? (JSON.parse(live) as LiveNodeState) : null,
    };
  }
}
