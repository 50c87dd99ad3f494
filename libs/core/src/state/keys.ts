/**
 * Every Redis key and channel Tetraloop uses, built in one place. The keys of one run share the
 * hash tag `{runId}` so a run's multi-key scripts stay on one Redis Cluster slot. The keys that
 * belong to one tenant are built from the family heads below, and `tenantKeyPatterns` (what
 * deleting a tenant scans for) from the same heads, so a key and its pattern cannot drift apart.
 */
import { createHash } from 'node:crypto';
import { DEFAULT_TENANT, scopedName } from '../domain/tenant.js';

/**
 * Families of keys named by a tenant-scoped name (`<tenant>~<name>`, see `scopedName`): every key
 * of a family is its head, then the name. A tenant's keys of the family are those whose name
 * begins with `<tenant>~`.
 */
const SCOPED_HEADS = {
  /** `<prefix>:session:{s:<sessionKey>}…` */
  session: (prefix: string) => `${prefix}:session:{s:`,
  /** `<prefix>:memory:{m:<agentId>}…` */
  memory: (prefix: string) => `${prefix}:memory:{m:`,
  /** `<prefix>:plancache:{a:<agentId>}:<hash>` */
  planCache: (prefix: string) => `${prefix}:plancache:{a:`,
  /** `<prefix>:blob:<tenant>~<hex>` */
  blob: (prefix: string) => `${prefix}:blob:`,
} as const;

/**
 * Families of keys that carry their tenant in the hash tag `{t:<tenant>}`, so one script takes
 * several of a tenant's keys: every key of a family begins with `<prefix>:<family>:{t:<tenant>}`.
 */
const TENANT_TAGGED = ['secrets', 'webhooks', 'rate', 'slots', 'cost', 'triggers', 'events'] as const;
const taggedBase = (family: (typeof TENANT_TAGGED)[number], prefix: string, tenant: string): string =>
  `${prefix}:${family}:{t:${tenant}}`;

/** What one tenant's indexes (its runs, their search indexes, its sessions) are named under. */
const tenantIndexBase = (prefix: string, tenant: string): string => `${prefix}:tenant:${tenant}`;

export interface RunKeys {
  /** Hash: status, timestamps, graph, input, output, error. */
  readonly meta: string;
  /** Hash nodeId → dependencies not yet completed (readiness counters). */
  readonly pending: string;
  /** Hash nodeId → immutable snapshot JSON, written once. */
  readonly nodes: string;
  /** Hash nodeId → transient `{status: queued|running|retrying|waiting, …}` until the snapshot exists. */
  readonly live: string;
  /** Stream of the run's events, ids `0-<seq>`. */
  readonly events: string;
  /** Hash of execution bookkeeping: executions and attempts per node, loop progress, usage, signals. */
  readonly aux: string;
}

export function runKeys(prefix: string, runId: string): RunKeys {
  const base = `${prefix}:run:{${runId}}`;
  return {
    meta: base,
    pending: `${base}:pending`,
    nodes: `${base}:nodes`,
    live: `${base}:live`,
    events: `${base}:events`,
    aux: `${base}:aux`,
  };
}

/**
 * A run's node slots (`maxParallelNodes`): its node jobs holding one, and those waiting. Beside the
 * run's keys (same hash tag) but not among them: only a run with a cap has them.
 */
export function runNodeSlotKeys(prefix: string, runId: string): SlotSetKeys {
  const base = `${prefix}:run:{${runId}}:slots`;
  return { running: `${base}:running`, waiting: `${base}:waiting` };
}

/** All keys of a run, in the order every run script expects them. */
export function runKeyList(keys: RunKeys): string[] {
  return [keys.meta, keys.pending, keys.nodes, keys.live, keys.events, keys.aux];
}

/**
 * Sorted set of runs not yet started → when they were accepted (epoch ms): what the reconciler
 * looks through for a run whose root job was never enqueued. One key for the deployment, so it is
 * written by its own command beside the run's script (a Redis Cluster slot of its own): added
 * before the run is created, removed once it has started or ended, and cleaned by the reconciler
 * of entries whose run is gone or no longer queued.
 */
export const queuedRunsKey = (prefix: string): string => `${prefix}:runs:queued`;

/**
 * Sorted set of started runs → their deadline (epoch ms), which the plan pool sweeps for runs past
 * it (`executor/run-deadlines.ts`). One key for the deployment, written by the run's scripts (on a
 * Redis Cluster just after them, as an index write): a run is added when it starts and removed when
 * it settles, or by the sweep once its deadline passed and it is decided or gone. Holds the runs
 * not yet settled, and until their deadline the entries whose removal was lost (a cluster's write
 * after the script, a run settled by an older process, a deleted run).
 */
export const runDeadlinesKey = (prefix: string): string => `${prefix}:runs:deadlines`;

/**
 * A key each API process writes (with a short TTL) just before it waits for replicas or the
 * AOF (see `durability/accept-barrier.ts`): the write that makes the wait cover every write before it.
 */
export const acceptBarrierKey = (prefix: string): string => `${prefix}:accept:barrier`;

/** Sorted set of one tenant's run ids by creation time (ms), trimmed to the retention window. */
export const tenantRunsKey = (prefix: string, tenant: string): string =>
  `${tenantIndexBase(prefix, tenant)}:runs`;

/**
 * One tenant's run search indexes: sorted sets of run ids by creation time (ms), one per value a
 * search filters on. Written by the run scripts (`run.lib.lua`), which name them from `base` (a run
 * records it at creation, in its hash's `index`) by the same suffixes as here; child runs are in
 * none. Each is trimmed by score to the runs that can still exist whenever it is written.
 */
export interface RunSearchKeys {
  /** What the run scripts append `:<kind>:<value>` to. */
  readonly base: string;
  /** Every run of the tenant that is listed. */
  readonly all: string;
  status(status: string): string;
  agent(agentId: string): string;
  /** `sessionKey` as stored (tenant-scoped). */
  session(sessionKey: string): string;
  tag(tag: string): string;
  schedule(scheduleId: string): string;
  trigger(triggerId: string): string;
}

export function runSearchKeys(prefix: string, tenant: string): RunSearchKeys {
  const base = `${tenantIndexBase(prefix, tenant)}:search`;
  return {
    base,
    all: `${base}:all`,
    status: (status) => `${base}:status:${status}`,
    agent: (agentId) => `${base}:agent:${agentId}`,
    session: (sessionKey) => `${base}:session:${sessionKey}`,
    tag: (tag) => `${base}:tag:${tag}`,
    schedule: (scheduleId) => `${base}:schedule:${scheduleId}`,
    trigger: (triggerId) => `${base}:trigger:${triggerId}`,
  };
}

/**
 * One tenant's schedules: a hash id → `Schedule` JSON (bounded by `TETRALOOP_SCHEDULES_MAX`), and
 * per schedule a hash of what its firings did. Under the tenant's index base, so deleting the
 * tenant deletes them.
 */
export const scheduleKeys = (prefix: string, tenant: string) => ({
  schedules: `${tenantIndexBase(prefix, tenant)}:schedules`,
  state: (scheduleId: string): string => `${tenantIndexBase(prefix, tenant)}:schedules:${scheduleId}:state`,
});

/**
 * Sorted set of one tenant's sessions (as stored, tenant-scoped) → when they were last written
 * (ms): what `GET /v1/sessions` lists. Written beside each session write, trimmed to the idle TTL.
 */
export const tenantSessionsKey = (prefix: string, tenant: string): string =>
  `${tenantIndexBase(prefix, tenant)}:sessions`;

/**
 * One tenant's store items (the LangGraph Agent Protocol's `/store`): a hash whose fields are
 * `JSON.stringify([namespace, key])` and whose values are the item records, bounded by
 * `TETRALOOP_STORE_ITEMS_MAX`. Under the tenant's index base, so deleting the tenant deletes it.
 */
export const storeItemsKey = (prefix: string, tenant: string): string =>
  `${tenantIndexBase(prefix, tenant)}:store`;

export interface Channels {
  /** Published with a run id when the run's outcome is decided as not succeeded: abort its nodes. */
  readonly abort: string;
  /** Published with a run id once the run has settled (every node final). */
  readonly settled: string;
  /** Published with a tenant when its webhook subscriptions changed: processes drop their copy. */
  readonly webhooks: string;
}

export function channels(prefix: string): Channels {
  return {
    abort: `${prefix}:runs:abort`,
    settled: `${prefix}:runs:settled`,
    webhooks: `${prefix}:webhooks:changed`,
  };
}

/**
 * Hash server name → its tool list as a worker last listed it (`ServerCatalog` JSON): how the API
 * (and a worker that cannot reach a server) knows MCP tools' schemas. One key for the deployment.
 */
export const mcpCatalogKey = (prefix: string): string => `${prefix}:mcp:catalog`;

/** Published with a server's name when its entry in `mcpCatalogKey` was written. */
export const mcpCatalogChannel = (prefix: string): string => `${prefix}:mcp:catalog:changed`;

export interface SessionKeys {
  /**
   * Hash: createdAt, contextId, contextFrom (where the context's transcript lines start), mode,
   * running run, environment version, bootstrap snapshot, the context's latest compaction.
   */
  readonly meta: string;
  /** List of the lane's waiting items: run ids, or `collect` for the collected messages. */
  readonly queue: string;
  /** List of messages collected while the lane was busy (JSON). */
  readonly buffer: string;
  /** List of transcript lines (JSON). */
  readonly transcript: string;
  /** List of the environment's recent events (JSON), newest last. */
  readonly env: string;
  /**
   * Sorted set of the ids of the messages admitted within the dedupe window (score: when). Not
   * among the keys every session script refreshes (`sessionKeyList`): it lives for the window.
   */
  readonly seen: string;
  /** String: the run whose reply a pass is writing, for the lease's time (see `leaseReply`). */
  readonly replying: string;
}

/** Keys of one session share the hash tag `{s:<sessionKey>}`. */
export function sessionKeys(prefix: string, sessionKey: string): SessionKeys {
  const base = `${SCOPED_HEADS.session(prefix)}${sessionKey}}`;
  return {
    meta: base,
    queue: `${base}:queue`,
    buffer: `${base}:buffer`,
    transcript: `${base}:transcript`,
    env: `${base}:env`,
    seen: `${base}:seen`,
    replying: `${base}:replying`,
  };
}

/** The keys every session script takes, in order, and gives the idle TTL. */
export const sessionKeyList = (k: SessionKeys): string[] => [k.meta, k.queue, k.buffer, k.transcript, k.env];

/** Sessions whose lane holds a run (or is about to), for the sweep that keeps lanes moving. */
export const busySessionsKey = (prefix: string): string => `${prefix}:sessions:busy`;

/** Known event sources and their status. */
export const sourcesKey = (prefix: string): string => `${prefix}:sources`;

/** A file source's files as last taken: name → `<mtimeMs>:<size>`. */
export const fileSourceKey = (prefix: string, source: string): string => `${prefix}:sources:${source}:files`;

/** Who holds a WebSocket source's connection: the lease of one sense worker (TTL). */
export const sourceLeaseKey = (prefix: string, source: string): string => `${prefix}:sources:${source}:lease`;

/** Marks an event id (or content hash) seen, for deduplication within a window. */
export const dedupeKey = (prefix: string, source: string, eventId: string): string =>
  `${prefix}:dedupe:${source}:${createHash('sha256').update(eventId).digest('hex').slice(0, 32)}`;

/** A webhook signature seen recently (replay protection); expires after the tolerance. */
export const webhookSignatureKey = (prefix: string, source: string, t: number, v1: string): string =>
  `${prefix}:webhook:seen:${source}:${t}:${v1}`;

/** Events of one source and type waiting to be merged into one summary event. */
export const burstKey = (prefix: string, source: string, type: string, sessionKey: string): string =>
  `${prefix}:burst:${source}:${type}:${sessionKey}`;

export interface MemoryKeys {
  /** Hash: runs settled (all, and since the last reflection), failure streak, failures per service since the last reflection, lessons version, last reflection. */
  readonly meta: string;
  /** List of run summaries (JSON), newest first: the hot set. */
  readonly runs: string;
  /** Hash of counters per `<tool>|<target>`: calls, failures by class, latency buckets. */
  readonly stats: string;
  /** Hash lesson id → lesson JSON. */
  readonly lessons: string;
}

/** Keys of one agent's memory share the hash tag `{m:<agentId>}`, so its scripts stay on one slot. */
export function memoryKeys(prefix: string, agentId: string): MemoryKeys {
  const base = `${SCOPED_HEADS.memory(prefix)}${agentId}}`;
  return { meta: base, runs: `${base}:runs`, stats: `${base}:stats`, lessons: `${base}:lessons` };
}

export const memoryKeyList = (k: MemoryKeys): string[] => [k.meta, k.runs, k.stats, k.lessons];

/** The lock that lets one probe call through to a service a hard lesson blocks, once per interval. */
export const probeKey = (prefix: string, agentId: string, lessonId: string): string =>
  `${memoryKeys(prefix, agentId).meta}:probe:${lessonId}`;

/** Agents that have memory, for the periodic reflection. */
export const memoryAgentsKey = (prefix: string): string => `${prefix}:memory:agents`;

/**
 * A content-addressed blob: the JSON text of a large node output, under the SHA-256 of that text
 * (64 lowercase hex digits). Shared by every run of one tenant that produced the same text; each
 * tenant's are its own.
 */
export const blobKey = (prefix: string, tenant: string, hex: string): string =>
  `${SCOPED_HEADS.blob(prefix)}${scopedName(tenant, hex)}`;

/**
 * One entry of an agent's plan cache: a validated first plan under the hash of everything the
 * planner's answer depends on (see `planning/cached-plan.ts`). Keys of one agent share the hash
 * tag `{a:<agentId>}`.
 */
export const planCacheKey = (prefix: string, agentId: string, hash: string): string =>
  `${SCOPED_HEADS.planCache(prefix)}${agentId}}:${hash}`;

/** Hash of one API key: its secret's hash, tenant, scopes, name, times. Expires with the key. */
export const apiKeyKey = (prefix: string, keyId: string): string => `${prefix}:auth:key:${keyId}`;

/**
 * Set of the ids of the API keys one key made (its tenant's; see `domain/key-grant.ts`): what
 * revoking it revokes with it. Expires with the key (a key it made expires no later); deleted when
 * the key is revoked or its tenant deleted; pruned of keys gone whenever a key is added to it, so
 * it holds at most the tenant's key limit and one more.
 */
export const apiKeyChildrenKey = (prefix: string, keyId: string): string =>
  `${prefix}:auth:key:${keyId}:children`;

/** Set of the ids of one tenant's API keys. */
export const tenantApiKeysKey = (prefix: string, tenant: string): string =>
  `${prefix}:auth:tenant-keys:${tenant}`;

/** Tenants that have API keys. */
export const apiKeyTenantsKey = (prefix: string): string => `${prefix}:auth:tenants`;

/** A Bull Board login: the SHA-256 of the session cookie's value, with a TTL. */
export const adminSessionKey = (prefix: string, hash: string): string =>
  `${prefix}:auth:admin-session:${hash}`;

export interface SecretKeys {
  /** Hash secret name → its value, encrypted (`v1.<base64>`, see `secrets/secret-cipher.ts`). */
  readonly values: string;
  /** Hash secret name → when it was last written (ISO time): what listing reads, never a value. */
  readonly updated: string;
  /** Hash secret name → where it may go (JSON `{"hosts", "tools"}`, see `secrets/secret-scope.ts`). */
  readonly scopes: string;
}

/** Keys of one tenant's secrets share the hash tag `{t:<tenant>}`, so its scripts stay on one slot. */
export function secretKeys(prefix: string, tenant: string): SecretKeys {
  const base = taggedBase('secrets', prefix, tenant);
  return { values: base, updated: `${base}:updated`, scopes: `${base}:scopes` };
}

export const secretKeyList = (k: SecretKeys): string[] => [k.values, k.updated, k.scopes];

/**
 * The deployment's random key for outbound `Idempotency-Key`s (hex), written once, used when no
 * `TETRALOOP_SECRET_KEY` is configured to derive one from.
 */
export const callKeyKey = (prefix: string): string => `${prefix}:deployment:call-key`;
/**
 * A token bucket of request rates: one per tenant (`keyId` null) and one per API key of the
 * tenant. A tenant's buckets share the hash tag `{t:<tenant>}`, so one script takes from both.
 */
export const rateBucketKey = (prefix: string, tenant: string, keyId: string | null): string =>
  `${taggedBase('rate', prefix, tenant)}:${keyId === null ? 'tenant' : `key:${keyId}`}`;

export interface SlotSetKeys {
  /** Sorted set: the members holding a slot → when they got it (epoch ms). */
  readonly running: string;
  /** Sorted set: the members waiting for a slot → when they first waited (epoch ms). */
  readonly waiting: string;
}

/** A tenant's running slots: its runs holding one, and its runs waiting for one. */
export type TenantSlotKeys = SlotSetKeys;

/** Keys of one tenant's running slots share the hash tag `{t:<tenant>}`. */
export function tenantSlotKeys(prefix: string, tenant: string): TenantSlotKeys {
  const base = taggedBase('slots', prefix, tenant);
  return { running: `${base}:running`, waiting: `${base}:waiting` };
}

/**
 * Flow control's counters and queues (`lua-flow/flow.lib.lua` lists them): all under one hash tag
 * `{f}`, so a call's counters are taken together in one script.
 */
export interface FlowKeys {
  /**
   * What every counter's and member's keys are named from (`<prefix>:flow:{f}`): the flow scripts
   * take it as KEYS[1] to name the keys they learn only at run time.
   */
  readonly base: string;
  /** Set of the counters with waiters. */
  readonly waiting: string;
  /** Sorted set: members granted capacity but not yet running → when they were last woken (ms). */
  readonly granted: string;
  /** Sorted set: counter → when it was last used (ms), what `GET /v1/limits` lists. */
  readonly counters: string;
  /** One counter's keys (its ring and queues per priority are named by the scripts). */
  counter(id: string): FlowCounterKeys;
  /** Hash of one call that waits or was granted capacity (a member: its node job's id). */
  member(member: string): string;
}

export interface FlowCounterKeys {
  /** Hash: the limit as last seen, adaptive factor, pause, tokens reserved in the interval. */
  readonly state: string;
  /** Sorted set: member → lease expiry (calls in flight). */
  readonly inflight: string;
  /** Sorted set: reservation → when its call ended (calls inside the rate's interval). */
  readonly log: string;
}

export function flowKeys(prefix: string): FlowKeys {
  const base = `${prefix}:flow:{f}`;
  return {
    base,
    waiting: `${base}:waiting`,
    granted: `${base}:granted`,
    counters: `${base}:counters`,
    counter: (id) => {
      const state = `${base}:k:${id}`;
      return { state, inflight: `${state}:inflight`, log: `${state}:log` };
    },
    member: (member) => `${base}:m:${member}`,
  };
}

/** The limits an admin set with `PUT /v1/limits` (JSON with its version), over the configured ones. */
export const flowLimitsKey = (prefix: string): string => `${prefix}:flow:limits`;

/**
 * One tenant's model spending on one UTC day (`YYYY-MM-DD`): a hash of nano-dollar totals and call
 * counts, for the tenant and per agent, session and model. Keys of one tenant share the hash tag
 * `{t:<tenant>}`; each expires `TETRALOOP_COST_LEDGER_DAYS` after its day.
 */
export const costDayKey = (prefix: string, tenant: string, day: string): string =>
  `${taggedBase('cost', prefix, tenant)}:${day}`;

export interface WebhookKeys {
  /**
   * Hash subscription id → its record (JSON: id, url, events, createdAt and its signing secret,
   * encrypted). Bounded by `TETRALOOP_WEBHOOK_SUBSCRIPTIONS_MAX`.
   */
  readonly subscriptions: string;
  /** The tenant's signing secret of runs' own `webhook`s, encrypted; one value. */
  readonly signing: string;
}

/** Keys of one tenant's outbound webhooks share the hash tag `{t:<tenant>}`. */
export function webhookKeys(prefix: string, tenant: string): WebhookKeys {
  const base = taggedBase('webhooks', prefix, tenant);
  return { subscriptions: base, signing: `${base}:signing` };
}

/**
 * List of a subscription's (or of a run's own webhook's) recent delivery attempts, newest first:
 * trimmed to `TETRALOOP_WEBHOOK_DELIVERIES_KEPT` and expiring `TETRALOOP_WEBHOOK_DELIVERIES_TTL_SECONDS`
 * after the last one. Under the tenant's webhook keys, so deleting the tenant deletes them.
 */
export const webhookDeliveriesKey = (
  prefix: string,
  tenant: string,
  target: { readonly subscription: string } | { readonly runId: string },
): string =>
  `${webhookKeys(prefix, tenant).subscriptions}:deliveries:${
    'subscription' in target ? target.subscription : `run:${target.runId}`
  }`;

/**
 * Hash trigger id → its record (JSON, see `triggers/trigger-model.ts`), one per tenant, bounded by
 * `TETRALOOP_TRIGGERS_MAX`. Under the tag `{t:<tenant>}`, the slot of the tenant's event keys too.
 */
export const triggersKey = (prefix: string, tenant: string): string => taggedBase('triggers', prefix, tenant);

/** A name's hash as it appears in a key: event ids and debounce or batch keys are the sender's text. */
export const keyHash = (name: string): string => createHash('sha256').update(name).digest('hex').slice(0, 32);

/**
 * One tenant's events and what its triggers hold of them, all under the tag `{t:<tenant>}` (with
 * its triggers), so one script takes an event and a batch together. Every key has a TTL.
 */
export interface EventKeys {
  /** Counter: the order of the tenant's events (`seq`), so the last of a debounce is known. */
  readonly seq: string;
  /**
   * Hash of one event, by its id's hash: `e` the event (JSON), `seq`, `q` once handed to the sense
   * loop, `b:<triggerId>` what adding it to that trigger's batch decided. Lives the dedupe window.
   */
  event(idHash: string): string;
  /** Sorted set of a batch's pending events (JSON, by `seq`), and its counter of flushes (`:n`). */
  batch(triggerId: string, batchKeyHash: string): string;
  /** The events one flush took (JSON array; `[]` once its run exists), kept for a retried flush. */
  taken(triggerId: string, batchKeyHash: string, flush: number): string;
  /** Hash of a debounce key's latest event: `seq`, `e`, `done` (the last `seq` a run consumed). */
  debounce(triggerId: string, debounceKeyHash: string): string;
}

export function eventKeys(prefix: string, tenant: string): EventKeys {
  const base = taggedBase('events', prefix, tenant);
  return {
    seq: `${base}:seq`,
    event: (idHash) => `${base}:e:${idHash}`,
    batch: (triggerId, hash) => `${base}:batch:${triggerId}:${hash}`,
    taken: (triggerId, hash, flush) => `${base}:taken:${triggerId}:${hash}:${flush}`,
    debounce: (triggerId, hash) => `${base}:debounce:${triggerId}:${hash}`,
  };
}

/**
 * Patterns (`SCAN … MATCH`) that together match every key belonging to `tenant` that its stores
 * name after it, and no key of another tenant: its indexes, its sessions, agents' memory, cached
 * plans and blobs (by scoped name), and its secrets, webhooks, rate buckets, running slots,
 * daily costs, triggers and events (by hash tag). A tenant name has no glob character (`TenantId`). Its runs' keys are
 * found through its run index and its API keys through their own index. The default tenant's names
 * are bare, so no pattern matches its keys alone.
 */
export function tenantKeyPatterns(prefix: string, tenant: string): string[] {
  if (tenant === DEFAULT_TENANT) throw new Error('the default tenant has no key patterns of its own');
  const scoped = `${scopedName(tenant, '')}*`;
  return [
    `${tenantIndexBase(prefix, tenant)}:*`,
    ...Object.values(SCOPED_HEADS).map((head) => `${head(prefix)}${scoped}`),
    ...TENANT_TAGGED.map((family) => `${taggedBase(family, prefix, tenant)}*`),
  ];
}

/**
 * The custom tool catalog: what the team's tool workers serve (`state/tool-catalog-store.ts`). One
 * hash tag for its keys, so a heartbeat writes them in one transaction on a cluster too.
 */
export interface ToolCatalogKeys {
  /** Hash tool name → `ToolCatalogEntry` JSON: its latest definition and the versions seen. */
  readonly tools: string;
  /** Hash worker id → `ToolWorkerEntry` JSON: which tools a live worker process serves. */
  readonly workers: string;
  /** Sorted set worker id → when its heartbeat runs out (ms): who is still alive. */
  readonly beats: string;
  /** Published when a tool or a version is new or gone, so every process reads the catalog again. */
  readonly channel: string;
}

export const toolCatalogKeys = (prefix: string): ToolCatalogKeys => ({
  tools: `${prefix}:tools:{tools}:catalog`,
  workers: `${prefix}:tools:{tools}:workers`,
  beats: `${prefix}:tools:{tools}:beats`,
  channel: `${prefix}:tools:changed`,
});
