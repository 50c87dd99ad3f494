/**
 * A run's event stream (ids `0-<seq>`): events that go with no state change are appended here;
 * every other event is appended by the script of the change it describes. Reads go by sequence
 * number, one run's stream at a time or several runs' in one blocking read.
 */
import { isCluster, type RedisClient } from '../redis-client.js';
import { familyOf, type RunEvent } from '../../domain/run-model.js';
import type { RunContext } from './run-context.js';

export class RunEventLog {
  constructor(private readonly ctx: RunContext) {}

  /**
   * Appends an event that goes with no state change (streamed text, model usage). With
   * `maxPerNode`, at most that many events of its type are kept per node of the run, across its
   * attempts: false once the node has reached it (the event was dropped).
   */
  async appendEvent(
    runId: string,
    type: string,
    nodeId: string | undefined,
    data: unknown,
    options: { readonly maxPerNode?: number } = {},
  ): Promise<boolean> {
    const seq = await this.ctx.script('append-event-6', this.ctx.scriptKeys(runId), [
      type,
      nodeId ?? '',
      data === undefined ? '' : JSON.stringify(data),
      options.maxPerNode === undefined ? '' : String(options.maxPerNode),
    ]);
    return seq !== -1;
  }

  /** Events with seq > `afterSeq`, oldest first. */
  async events(runId: string, afterSeq: number, count = 1000): Promise<RunEvent[]> {
    const key = this.ctx.keysOf(runId).events;
    const entries = await this.ctx.redis.xrange(key, `(0-${afterSeq}`, '+', 'COUNT', count);
    return entries.map(([id, fields]) => toEvent(runId, id, fields));
  }

  /**
   * One `XREAD BLOCK` over several runs' event streams on `connection` (a dedicated one): the
   * events after each run's `afterSeq`, at most `count` per run, keyed by run; empty when `blockMs`
   * passed with none (or the read was unblocked).
   */
  async readEventStreams(
    connection: RedisClient,
    cursors: ReadonlyArray<{ readonly runId: string; readonly afterSeq: number }>,
    blockMs: number,
    count = 1000,
  ): Promise<Map<string, RunEvent[]>> {
    const found = new Map<string, RunEvent[]>();
    if (cursors.length === 0) return found;
    const runOf = new Map<string, string>();
    const keys = cursors.map(({ runId }) => {
      const key = this.ctx.keysOf(runId).events;
      runOf.set(key, runId);
      return key;
    });
    const ids = cursors.map(({ afterSeq }) => `0-${afterSeq}`);
    const result = isCluster(connection)
      ? await pollStreams(connection, keys, ids, blockMs, count)
      : await connection.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', ...keys, ...ids);
    for (const [key, entries] of result ?? []) {
      const runId = runOf.get(key);
      if (runId !== undefined)
        found.set(
          runId,
          entries.map(([id, fields]) => toEvent(runId, id, fields)),
        );
    }
    return found;
  }
}

function toEvent(runId: string, id: string, fields: string[]): RunEvent {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
  const data = f.data ? (JSON.parse(f.data) as unknown) : undefined;
  const type = f.type ?? '';
  const event: RunEvent = {
    seq: Number(id.split('-')[1]),
    type,
    ...familyOf(type, data),
    ts: Number(f.ts),
    runId,
  };
  if (f.node) event.nodeId = f.node;
  if (data !== undefined) event.data = data;
  return event;
}

/** How long a read of several runs' streams on a Redis Cluster waits between polls. */
const CLUSTER_POLL_MS = 50;

/**
 * `XREAD` of several runs' streams on a Redis Cluster, where one `XREAD` names keys of one slot
 * only and each run's stream has its own: a non-blocking `XREAD` per stream, sent together, again
 * every `CLUSTER_POLL_MS` until one has entries or `blockMs` has passed.
 */
async function pollStreams(
  connection: RedisClient,
  keys: readonly string[],
  ids: readonly string[],
  blockMs: number,
  count: number,
): Promise<[string, [string, string[]][]][] | null> {
  const deadline = Date.now() + blockMs;
  for (;;) {
    const replies = await Promise.all(
      keys.map((key, i) => connection.xread('COUNT', count, 'STREAMS', key, ids[i]!)),
    );
    const found = replies.flatMap((r) => r ?? []);
    if (found.length > 0) return found;
    const left = deadline - Date.now();
    if (left <= 0) return null;
    await new Promise((resolve) => setTimeout(resolve, Math.min(CLUSTER_POLL_MS, left)));
  }
}
