/**
 * A run's state in Redis: its record, readiness counters, live node states, immutable node
 * snapshots, event stream and execution bookkeeping. Every multi-step change is one Lua script
 * (`state/lua/`), so a crash never leaves half a change, and each appends its events in the same
 * step.
 *
 * The state is kept by parts, one concern each, over one shared context (`run-context.ts`):
 * - `run-creation.ts`: a new run and the indexes that find it;
 * - `run-lifecycle.ts`: queued → running → decided → settled, resumed or deleted;
 * - `run-plan.ts`: the plan a worker reads, first plans, replans, windows, the environment;
 * - `node-state.ts`: beginning, running and completing nodes, and their snapshots;
 * - `run-signals.ts`: signals and the waits that take them;
 * - `run-event-log.ts`: the event stream;
 * - `run-read-model.ts`: the document, the header, what settling and webhooks read.
 *
 * `RunStore` is every part's methods on one object, for the services that use several. A module
 * that uses one part names what it uses of that part (`Pick<RunEventLog, 'events'>`) and is given
 * the store.
 */
import type { RedisClient } from '../redis-client.js';
import { BlobStore } from '../blob-store.js';
import { RunIndex } from '../run-index.js';
import type { Channels } from '../keys.js';
import { RunContext, type RunStoreOptions } from './run-context.js';
import { RunCreation } from './run-creation.js';
import { RunLifecycle } from './run-lifecycle.js';
import { RunPlans } from './run-plan.js';
import { NodeStates } from './node-state.js';
import { RunSignals } from './run-signals.js';
import { RunEventLog } from './run-event-log.js';
import { RunReadModel } from './run-read-model.js';
import { MapItems } from './map-items.js';

export { snapshotJson, type RunStoreOptions } from './run-context.js';
export type { NewRun, CreateResult } from './run-creation.js';
export type { ReconcileView } from './run-lifecycle.js';
export type { RunPlan, WindowState, NewPlan } from './run-plan.js';
export type { BeginNodeResult, CompleteNodeResult, HandoffRequest } from './node-state.js';
export type { SignalDelivery, WaitSpec, WaitState } from './run-signals.js';
export type { MapItem, MapState, CompleteItemResult } from './map-items.js';
export type { OutcomeState, RunHeader, TaskState, WebhookSubject } from './run-read-model.js';

/** A part's methods (its public members), without the context it keeps. */
type Methods<T> = { [K in keyof T]: T[K] };

/* eslint-disable @typescript-eslint/no-unsafe-declaration-merging --
   the interface lists the methods the class's constructor binds from each part onto the store */
export interface RunStore
  extends
    Methods<RunCreation>,
    Methods<RunLifecycle>,
    Methods<RunPlans>,
    Methods<NodeStates>,
    Methods<RunSignals>,
    Methods<RunEventLog>,
    Methods<RunReadModel>,
    Methods<MapItems> {}

export class RunStore {
  readonly channels: Channels;
  /** Large node outputs, stored once by content (see `blob-store.ts`). */
  readonly blobs: BlobStore;
  /** Each tenant's runs by status, agent, session and tag (see `run-index.ts`). */
  readonly index: RunIndex;

  constructor(redis: RedisClient, options: RunStoreOptions) {
    const ctx = new RunContext(redis, options);
    this.channels = ctx.channels;
    this.blobs = new BlobStore(redis, options);
    this.index = new RunIndex(redis, options.prefix);
    const parts = [
      new RunCreation(ctx),
      new RunLifecycle(ctx),
      new RunPlans(ctx),
      new NodeStates(ctx),
      new RunSignals(ctx),
      new RunEventLog(ctx),
      new RunReadModel(ctx),
      new MapItems(ctx),
    ];
    for (const part of parts) expose(this, part);
  }
}
/* eslint-enable @typescript-eslint/no-unsafe-declaration-merging */

/** Puts `part`'s methods, bound to it, on `store`; a name two parts share is a mistake. */
function expose(store: object, part: object): void {
  const methods = Object.getPrototypeOf(part) as Record<string, unknown>;
  for (const name of Object.getOwnPropertyNames(methods)) {
    const method = methods[name];
    if (name === 'constructor' || typeof method !== 'function') continue;
    if (Object.hasOwn(store, name)) throw new Error(`RunStore: two parts define ${name}`);
    Object.defineProperty(store, name, {
      value: method.bind(part) as unknown,
      writable: true,
      configurable: true,
    });
  }
}
