/**
 * `npm run chaos`: the whole deployment under faults, on loopback, bounded in count and time.
 *
 * Starts its own redis-server (AOF, `appendfsync everysec`, in a temp data dir), the loopback tool
 * server, the loopback scripted model server, one `tetraloop api` and three
 * `tetraloop worker --pool all` processes; submits runs (fan-out and diamond graphs of `http`
 * nodes) spread over a window, and sends sessions their messages (see support/chaos-sessions.ts),
 * while it SIGKILLs a random worker every 2 s (and starts a replacement; never the last ready one),
 * SIGKILLs the API once and Redis once (both restarted where they were). Then it waits for every
 * accepted run to settle and every session's lane to go idle, and gates on:
 *
 * - 0 lost: every run acknowledged (202) more than 1 s before the Redis kill is found and settled;
 * - 0 stuck: every found run settled within 5 minutes of the last fault;
 * - duplicates only as retries: every tool call made again carried its first attempt's Idempotency-Key;
 * - sessions: every accepted message answered by exactly one run that settled, the runs of a
 *   session one after the other in the order its messages were sent, and 0 stuck lanes (none
 *   still holding a run or queued items 5 minutes after the last fault).
 *
 * It reports the re-executed tool calls, the recovery time after a worker kill, the jobs BullMQ
 * took back from a worker (stalled) and what came before each, prints a table, writes
 * bench/results/<timestamp>-chaos.json and .md, and exits 1 when a gate fails.
 *
 *   npm run chaos                              1,000 runs and 50 sessions × 10 messages over 60 s,
 *                                              with the workers' default lock settings
 *   npm run chaos -- --runs 200 --seconds 15   a shorter one
 *   npm run chaos -- --fast-locks              locks of 2 s and a stalled check every 1 s
 *   npm run chaos -- --sessions 0              runs only
 *
 * Flags also read from the environment: TETRALOOP_CHAOS_RUNS, TETRALOOP_CHAOS_SECONDS.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { TetraloopApiError, TetraloopClient, type RunRequest } from '@tetraloop/client';
import { freePort, startRedisServer, type RedisServer } from '@tetraloop/core/runtime';
import { parseWorkerEnv } from '@tetraloop/workers';
import { startModelServer, type ChatRequest, type ModelServer } from '../test/support/model-server.js';
import { spawnTetraloop, stderrMatches, type Spawned } from '../test/support/processes.js';
import { startToolServer, type ToolServer } from '../test/support/tool-server.js';
import {
  checkSession,
  driveSession,
  echoModel,
  planSessions,
  summarizeSessions,
  waitForIdleLanes,
  type SessionsSummary,
} from './support/chaos-sessions.js';
import { mulberry32 } from './support/dag.js';
import { watchStalls } from './support/stall-watch.js';
import { machine, median, percentile } from './support/stack.js';

const { values: flags } = parseArgs({
  options: {
    runs: { type: 'string' },
    seconds: { type: 'string' },
    sessions: { type: 'string' },
    messages: { type: 'string' },
    'kill-every': { type: 'string' },
    'fast-locks': { type: 'boolean', default: false },
    seed: { type: 'string' },
  },
});

const RUNS = Number(flags.runs ?? process.env.TETRALOOP_CHAOS_RUNS ?? 1000);
const SECONDS = Number(flags.seconds ?? process.env.TETRALOOP_CHAOS_SECONDS ?? 60);
const SESSIONS = Number(flags.sessions ?? 50);
const MESSAGES = Number(flags.messages ?? 10);
const KILL_EVERY_MS = Number(flags['kill-every'] ?? 2000);
const SEED = Number(flags.seed ?? 14);
const WORKERS = 3;
/** A run must settle within this long after the last fault, or it counts as stuck. */
const SETTLE_MS = 5 * 60_000;
/** Runs acknowledged this close to the Redis kill may be lost by `appendfsync everysec`. */
const FSYNC_WINDOW_MS = 1000;
/** The workers' own defaults: what a run without `--fast-locks` uses (it sets none of these). */
const WORKER_DEFAULTS = parseWorkerEnv({ REDIS_URL: 'redis://127.0.0.1:6379' });
const DEFAULT_LOCKS = {
  TETRALOOP_LOCK_DURATION_MS: String(WORKER_DEFAULTS.TETRALOOP_LOCK_DURATION_MS),
  TETRALOOP_STALLED_INTERVAL_MS: String(WORKER_DEFAULTS.TETRALOOP_STALLED_INTERVAL_MS),
  TETRALOOP_MAX_STALLED_COUNT: String(WORKER_DEFAULTS.TETRALOOP_MAX_STALLED_COUNT),
};
const FAST_LOCKS = { TETRALOOP_LOCK_DURATION_MS: '2000', TETRALOOP_STALLED_INTERVAL_MS: '1000' };
/** The settings in effect; only `--fast-locks` passes any to the workers. */
const LOCKS = flags['fast-locks'] ? { ...DEFAULT_LOCKS, ...FAST_LOCKS } : DEFAULT_LOCKS;

const SETTLED = new Set(['succeeded', 'failed', 'cancelled', 'timed_out']);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const now = (): number => performance.timeOrigin + performance.now();
const log = (line: string): void =>
  void process.stderr.write(`[chaos ${new Date().toISOString()}] ${line}\n`);

interface GraphNode {
  readonly id: string;
  readonly ms: number;
}
interface Submission {
  readonly index: number;
  readonly key: string;
  readonly nodes: readonly GraphNode[];
  readonly edges: readonly (readonly [string, string])[];
  runId?: string;
  acceptedAt?: number;
  posts: number;
  /** Why it was never accepted. */
  refused?: string;
}
interface AttemptView {
  startedAt: string;
  finishedAt: string;
  worker: string;
}
interface NodeView {
  status: string;
  attempts?: AttemptView[];
  finishedAt?: string;
}
interface RunView {
  runId: string;
  status: string;
  finishedAt: string | null;
  nodes: Record<string, NodeView>;
  error: unknown;
}
interface WorkerKill {
  readonly at: number;
  readonly pid: number;
}

/** A fan-out (root → 2..5 leaves → join) or a diamond (a → b, c → d); node ids unique per run. */
function graphOf(index: number, rand: () => number): Pick<Submission, 'nodes' | 'edges'> {
  const ms = (): number => Math.round(50 + rand() * 250);
  const id = (name: string): string => `r${index}-${name}`;
  if (index % 2 === 0) {
    const width = 2 + Math.floor(rand() * 4);
    const leaves = Array.from({ length: width }, (_, i) => ({ id: id(`f${i}`), ms: ms() }));
    const root = { id: id('root'), ms: ms() };
    const join = { id: id('join'), ms: ms() };
    return {
      nodes: [root, ...leaves, join],
      edges: [...leaves.map((l) => [root.id, l.id] as const), ...leaves.map((l) => [l.id, join.id] as const)],
    };
  }
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => ({ id: id(n), ms: ms() }));
  return {
    nodes: [a!, b!, c!, d!],
    edges: [
      [a!.id, b!.id],
      [a!.id, c!.id],
      [b!.id, d!.id],
      [c!.id, d!.id],
    ],
  };
}

const runBody = (s: Submission, tools: string): unknown => ({
  graph: {
    nodes: s.nodes.map((n) => ({
      id: n.id,
      kind: 'tool',
      tool: 'http',
      args: { url: `${tools}/work?node=${n.id}&ms=${n.ms}` },
    })),
    edges: s.edges,
  },
});

/** A client of `api` whose every request gives up after 10 s (the API may be down mid-request). */
const chaosClient = (api: string): TetraloopClient =>
  new TetraloopClient({
    baseUrl: api,
    fetch: (request) => fetch(request, { signal: AbortSignal.timeout(10_000) }),
  });

/** Submits the run until it is accepted, retrying with the same Idempotency-Key on connection errors and 5xx/429. */
async function submit(
  client: TetraloopClient,
  s: Submission,
  tools: string,
  giveUpAt: number,
): Promise<void> {
  const body = runBody(s, tools) as RunRequest;
  for (;;) {
    s.posts += 1;
    try {
      const answer = await client.submit(body, { idempotencyKey: s.key });
      s.runId = answer.runId;
      s.acceptedAt = now();
      return;
    } catch (err) {
      if (err instanceof TetraloopApiError && err.status < 500 && err.status !== 429) {
        s.refused = `${err.status} ${JSON.stringify(err.body)}`;
        return;
      }
      // Unreachable, reset, or 5xx/429: the API (or Redis behind it) is down; retry.
    }
    if (now() > giveUpAt) {
      s.refused = 'gave up retrying';
      return;
    }
    await sleep(200);
  }
}

async function getRun(client: TetraloopClient, runId: string): Promise<RunView | 'missing' | undefined> {
  try {
    return await client.get(runId);
  } catch (err) {
    return err instanceof TetraloopApiError && err.status === 404 ? 'missing' : undefined;
  }
}

/** Maps `items` through `fn` with at most `limit` in flight. */
async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

async function waitUntilAnswering(url: string, p: Spawned): Promise<void> {
  for (;;) {
    if (p.child.exitCode !== null || p.child.signalCode !== null)
      throw new Error(`api exited during startup:\n${p.stderr()}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    await sleep(50);
  }
}

const pidOf = (worker: string): number => Number(worker.split('/').at(-1));
const ms = (iso: string): number => Date.parse(iso);
const round = (n: number): number => Math.round(n);
const stats = (values: readonly number[]): { n: number; median?: number; p95?: number; max?: number } =>
  values.length === 0
    ? { n: 0 }
    : {
        n: values.length,
        median: round(median(values)),
        p95: round(percentile(values, 95)),
        max: round(Math.max(...values)),
      };

/** Why BullMQ failed jobs, counted by reason (every queue under the prefix): what a failed run's nodes died of. */
async function failedJobReasons(url: string, prefix: string): Promise<Record<string, number>> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const reasons: Record<string, number> = {};
    const sets = await redis.keys(`${prefix}:*:failed`);
    for (const set of sets) {
      if ((await redis.type(set)) !== 'zset') continue;
      const base = set.slice(0, -':failed'.length);
      for (const id of await redis.zrange(set, '0', '-1')) {
        const reason = (await redis.hget(`${base}:${id}`, 'failedReason')) ?? '(none)';
        const key = `${base.slice(prefix.length + 1)}: ${reason.slice(0, 120)}`;
        reasons[key] = (reasons[key] ?? 0) + 1;
      }
    }
    return reasons;
  } finally {
    redis.disconnect();
  }
}

async function main(): Promise<number> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tetraloop-chaos-'));
  const processes = new Set<Spawned>();
  let tools: ToolServer | undefined;
  let model: ModelServer | undefined;
  let redis: RedisServer | undefined;
  const started = now();
  try {
    tools = await startToolServer();
    model = await startModelServer({ script: echoModel });
    redis = await startRedisServer({ dataDir: join(dataDir, 'redis') });
    const redisPort = Number(new URL(redis.url).port);
    const apiPort = await freePort();
    const api = `http://127.0.0.1:${apiPort}`;
    const client = chaosClient(api);
    const env: Record<string, string> = {
      REDIS_URL: redis.url,
      TETRALOOP_PREFIX: 'chaos',
      LOG_LEVEL: 'silent',
      TETRALOOP_AUTH: 'off',
      HOST: '127.0.0.1',
      PORT: String(apiPort),
      TETRALOOP_HTTP_ALLOW_HOSTS: '127.0.0.1',
      // Session runs: loop runs of the agent `main`, whose model is the scripted server.
      OPENAI_BASE_URL: model.url,
      TETRALOOP_WORKSPACE_DIR: join(dataDir, 'workspace'),
      ...(flags['fast-locks'] ? FAST_LOCKS : {}),
    };

    /** API processes that ended without being killed here: how, and the end of their stderr. */
    const apiExits: { at: number; code: number | null; signal: string | null; stderr: string }[] = [];
    const spawnApi = async (): Promise<Spawned> => {
      const p = spawnTetraloop(['api'], env);
      processes.add(p);
      void p.exited.then(({ code, signal }) => {
        if (!processes.has(p)) return;
        apiExits.push({ at: round(now() - started), code, signal, stderr: p.stderr().slice(-4000) });
        log(`api exited by itself (code ${code}, signal ${signal})`);
      });
      await waitUntilAnswering(api, p);
      return p;
    };
    const workers: Spawned[] = [];
    const ready = new Set<Spawned>();
    /** How long each worker took from its spawn to `worker ready`. */
    const workerStartMs: number[] = [];
    const spawnWorker = (): Spawned => {
      const spawnedAt = now();
      const p = spawnTetraloop(['worker', '--pool', 'all'], env);
      processes.add(p);
      workers.push(p);
      void stderrMatches(p, /worker ready/).then(
        () => {
          ready.add(p);
          workerStartMs.push(now() - spawnedAt);
        },
        () => undefined,
      );
      return p;
    };

    let apiProcess = await spawnApi();
    for (let i = 0; i < WORKERS; i++) spawnWorker();
    while (ready.size < WORKERS) await sleep(50);
    log(`stack up: redis ${redis.url} (AOF everysec in ${dataDir}), api ${api}, ${WORKERS} workers`);
    const stallWatch = watchStalls(redis.url, env.TETRALOOP_PREFIX!, ['tool', 'plan', 'sense']);

    const rand = mulberry32(SEED);
    const stamp = Date.now().toString(36);
    const submissions: Submission[] = Array.from({ length: RUNS }, (_, index) => ({
      index,
      key: `chaos-${stamp}-${index}`,
      posts: 0,
      ...graphOf(index, rand),
    }));
    const sessions = planSessions(SESSIONS, MESSAGES, SECONDS * 1000, rand, stamp);

    const windowMs = SECONDS * 1000;
    const t0 = now();
    const workerKills: WorkerKill[] = [];
    const faults: { kind: string; at: number; downMs: number; pid?: number }[] = [];
    let apiKilledAt = 0;
    let redisKilledAt = 0;

    // The faults, each on its own clock: a restart that takes a while does not delay the others.
    const end = t0 + windowMs;
    const killApi = (async () => {
      await sleep(t0 + windowMs * 0.4 - now());
      apiKilledAt = now();
      processes.delete(apiProcess);
      await apiProcess.kill('SIGKILL');
      apiProcess = await spawnApi();
      faults.push({ kind: 'api', at: apiKilledAt, downMs: round(now() - apiKilledAt) });
      log(`api killed and restarted in ${round(now() - apiKilledAt)} ms`);
    })();
    const killRedis = (async () => {
      await sleep(t0 + windowMs * 0.7 - now());
      redisKilledAt = now();
      process.kill(redis.pid, 'SIGKILL');
      await redis.stop();
      redis = await startRedisServer({ dataDir: join(dataDir, 'redis'), port: redisPort });
      faults.push({ kind: 'redis', at: redisKilledAt, downMs: round(now() - redisKilledAt) });
      log(`redis killed and restarted from its AOF in ${round(now() - redisKilledAt)} ms`);
    })();
    let skippedKills = 0;
    const killWorkers = (async () => {
      for (let due = t0 + KILL_EVERY_MS; due < end; due += KILL_EVERY_MS) {
        await sleep(due - now());
        // A worker crashes while others work: the last ready worker is not killed (replacements
        // take seconds to start on a loaded machine, and killing each one as it comes up is an
        // outage of the whole pool, not a worker crash); that kill is skipped and counted.
        const candidates = workers.filter((w) => ready.has(w));
        const victim =
          candidates.length >= 2 ? candidates[Math.floor(Math.random() * candidates.length)] : undefined;
        if (!victim) {
          skippedKills += 1;
          continue;
        }
        const at = now();
        const pid = victim.child.pid ?? -1;
        await victim.kill('SIGKILL');
        ready.delete(victim);
        workers.splice(workers.indexOf(victim), 1);
        processes.delete(victim);
        workerKills.push({ at, pid });
        faults.push({ kind: 'worker', at, pid, downMs: 0 });
        spawnWorker();
      }
    })();
    const chaos = Promise.all([killApi, killRedis, killWorkers]);

    // The load: run i is posted at t0 + i × window / runs.
    const posting = submissions.map(async (s) => {
      await sleep(Math.max(0, t0 + (s.index * windowMs) / RUNS - now()));
      await submit(client, s, tools!.url, t0 + windowMs + 60_000);
    });
    const talking = sessions.map((s) => driveSession(client, s, t0, t0 + windowMs + 60_000, now));
    await Promise.all([...posting, ...talking]);
    await chaos;
    const lastFault = Math.max(...faults.map((f) => f.at + f.downMs));
    const accepted = submissions.filter((s) => s.runId !== undefined);
    log(
      `${accepted.length}/${RUNS} accepted; ${workerKills.length} worker kills; waiting for runs to settle`,
    );

    // Settle: poll every accepted run until it settled, or the deadline passes.
    const deadline = lastFault + SETTLE_MS;
    const docs = new Map<string, RunView>();
    const missingSince = new Map<string, number>();
    let pending = accepted;
    while (pending.length > 0 && now() < deadline) {
      const answers = await pool(pending, 32, (s) => getRun(client, s.runId!));
      pending = pending.filter((s, i) => {
        const answer = answers[i];
        if (answer === 'missing') {
          if (!missingSince.has(s.runId!)) missingSince.set(s.runId!, now());
          return true;
        }
        missingSince.delete(s.runId!);
        if (answer && SETTLED.has(answer.status) && answer.finishedAt !== null) {
          docs.set(s.runId!, answer);
          return false;
        }
        return true;
      });
      // Only runs Redis does not know remain, for 30 s: they are not coming back.
      const allMissing = pending.every((s) => now() - (missingSince.get(s.runId!) ?? now()) > 30_000);
      if (pending.length > 0 && allMissing) break;
      if (pending.length > 0) await sleep(1000);
    }
    // Sessions: every lane idle by the same deadline, then each looked at.
    const lanes = await waitForIdleLanes(client, sessions, deadline, now);
    if (sessions.length > 0) log(`session lanes: ${lanes.busy.length} of ${sessions.length} still busy`);
    const lastUser = (r: ChatRequest): string | null | undefined =>
      [...r.messages].reverse().find((m) => m.role === 'user')?.content;
    const modelCallsFor = (text: string): number =>
      model!.requests.filter((r) => lastUser(r) === text).length;
    const sessionChecks = await pool(sessions, 8, (s) => checkSession(client, s, modelCallsFor));
    const settleEnded = now();
    await stallWatch.stop();
    const failedJobs = await failedJobReasons(redis.url, env.TETRALOOP_PREFIX!).catch((err: unknown) => ({
      [`could not read: ${String(err)}`]: 0,
    }));

    // Gates.
    const protectedRuns = accepted.filter((s) => s.acceptedAt! < redisKilledAt - FSYNC_WINDOW_MS);
    const lost = protectedRuns.filter((s) => !docs.has(s.runId!)).map((s) => s.runId!);
    const missing = accepted.filter((s) => missingSince.has(s.runId!)).map((s) => s.runId!);
    const missingInWindow = missing.filter((id) => !lost.includes(id));
    const stuck = accepted
      .filter((s) => {
        const doc = docs.get(s.runId!);
        if (!doc) return !missingSince.has(s.runId!);
        return doc.finishedAt === null || ms(doc.finishedAt) > deadline;
      })
      .map((s) => {
        const doc = docs.get(s.runId!);
        return { runId: s.runId!, status: doc?.status ?? 'unsettled', finishedAt: doc?.finishedAt ?? null };
      });
    const statuses: Record<string, number> = {};
    for (const doc of docs.values()) statuses[doc.status] = (statuses[doc.status] ?? 0) + 1;
    const distinctRunIds = new Set(accepted.map((s) => s.runId)).size;

    // Tool calls: one per node is the work; every other one is a re-execution.
    const work = tools.hits.filter((h) => h.path === '/work');
    const byNode = new Map<string, typeof work>();
    for (const h of work) byNode.set(h.node, [...(byNode.get(h.node) ?? []), h]);
    const reExecuted = work.length - byNode.size;
    const keyMismatches = [...byNode.entries()]
      .filter(([, hits]) => new Set(hits.map((h) => h.idempotencyKey)).size > 1 || !hits[0]!.idempotencyKey)
      .map(([node]) => node);
    const nodesOfSettled = [...docs.values()].reduce((n, d) => n + Object.keys(d.nodes).length, 0);
    const succeededNotCalled = [...docs.values()]
      .filter((d) => d.status === 'succeeded')
      .flatMap((d) => Object.keys(d.nodes).filter((id) => !byNode.has(id)));

    // Recovery after a worker kill: the killed worker's calls in flight at the kill (the tool
    // server had not answered yet) that were made again, until that node completed elsewhere.
    const msOf = new Map(submissions.flatMap((s) => s.nodes.map((n) => [n.id, n.ms] as const)));
    const nodeDoc = new Map<string, NodeView>();
    for (const doc of docs.values())
      for (const [id, view] of Object.entries(doc.nodes)) nodeDoc.set(id, view);
    // A kill whose recovery would overlap the Redis outage measures that outage instead.
    const recoveryBound =
      Number(LOCKS.TETRALOOP_LOCK_DURATION_MS) + Number(LOCKS.TETRALOOP_STALLED_INTERVAL_MS) + 2000;
    const redisQuiet = (at: number): boolean =>
      redisKilledAt === 0 || at < redisKilledAt - recoveryBound || at > redisKilledAt + 15_000;
    const perKill = workerKills.map((k) => {
      const restarts: number[] = [];
      const completions: number[] = [];
      let onVictim = 0;
      for (const [node, hits] of byNode) {
        const first = hits[0]!;
        if (hits.length < 2 || first.start > k.at || first.start + msOf.get(node)! < k.at) continue;
        const last = nodeDoc.get(node)?.attempts?.at(-1);
        if (!last || ms(last.startedAt) < k.at) continue;
        if (pidOf(last.worker) === k.pid) onVictim += 1;
        restarts.push(ms(last.startedAt) - k.at);
        completions.push(ms(last.finishedAt) - k.at);
      }
      return {
        at: round(k.at - t0),
        pid: k.pid,
        /** Its recovery could overlap the Redis outage. */
        nearRedisKill: !redisQuiet(k.at),
        inFlight: completions.length,
        onVictim,
        restartMs: restarts.length ? round(Math.max(...restarts)) : null,
        recoveryMs: completions.length ? round(Math.max(...completions)) : null,
      };
    });
    const recoveries = perKill.flatMap((k) =>
      k.recoveryMs === null || k.nearRedisKill ? [] : [k.recoveryMs],
    );
    const allRecoveries = perKill.flatMap((k) => (k.recoveryMs === null ? [] : [k.recoveryMs]));
    const nodeRecoveries = workerKills.flatMap((k) =>
      [...byNode].flatMap(([node, hits]) => {
        const first = hits[0]!;
        if (
          !redisQuiet(k.at) ||
          hits.length < 2 ||
          first.start > k.at ||
          first.start + msOf.get(node)! < k.at
        )
          return [];
        const last = nodeDoc.get(node)?.attempts?.at(-1);
        return last && ms(last.startedAt) >= k.at ? [ms(last.finishedAt) - k.at] : [];
      }),
    );

    const sessionsResult = summarizeSessions(sessions, sessionChecks, lanes, {
      redisKilledAt,
      lastFault,
      fsyncWindowMs: FSYNC_WINDOW_MS,
    });
    // Jobs BullMQ took back from a worker: after a worker kill or the Redis restart (within a
    // lock, two stalled checks and 5 s), or else from a live worker that did not renew its lock.
    const stallWindow =
      Number(LOCKS.TETRALOOP_LOCK_DURATION_MS) + 2 * Number(LOCKS.TETRALOOP_STALLED_INTERVAL_MS) + 5000;
    const redisDown = faults.find((f) => f.kind === 'redis')?.downMs ?? 0;
    const stallEvents = stallWatch.events.filter((e) => e.event === 'stalled');
    // A worker kill first (it takes its jobs' locks with it for sure), then the Redis restart.
    const causeOf = (at: number): 'workerKill' | 'redisRestart' | 'noFault' =>
      workerKills.some((k) => at >= k.at && at <= k.at + stallWindow)
        ? 'workerKill'
        : redisKilledAt > 0 && at >= redisKilledAt && at <= redisKilledAt + redisDown + stallWindow
          ? 'redisRestart'
          : 'noFault';
    const stallCount = (pick: (e: (typeof stallEvents)[number]) => string): Record<string, number> => {
      const out: Record<string, number> = {};
      for (const e of stallEvents) out[pick(e)] = (out[pick(e)] ?? 0) + 1;
      return out;
    };
    // How long BullMQ took to hand a killed worker's jobs back (lock expiry, then a stalled check):
    // each stall after a kill, from the latest kill before it; per kill, the last of them.
    const handBack = new Map<WorkerKill, number[]>();
    for (const e of stallEvents) {
      const kill = workerKills.filter((k) => k.at <= e.at && e.at <= k.at + stallWindow).at(-1);
      if (kill) handBack.set(kill, [...(handBack.get(kill) ?? []), e.at - kill.at]);
    }
    const stalls = {
      note: `BullMQ 'stalled' events: a job whose lock expired, moved back to wait; by queue, and by what came within ${stallWindow} ms before (a worker kill, the Redis kill and restart, or no fault)`,
      total: stallEvents.length,
      byQueue: stallCount((e) => e.queue),
      byCause: stallCount((e) => causeOf(e.at)),
      noFaultAtMs: stallEvents.filter((e) => causeOf(e.at) === 'noFault').map((e) => round(e.at - t0)),
      distinctJobs: new Set(stallEvents.map((e) => `${e.queue}:${e.jobId}`)).size,
      /** Per worker kill: from the kill until BullMQ had handed the last of its jobs back. */
      handedBackAfterKillMs: stats([...handBack.values()].map((ms) => Math.max(...ms))),
      timeline: stallEvents.map((e) => [round(e.at - t0), e.queue] as const),
    };
    const gates = {
      noneLost: lost.length === 0,
      noneStuck: stuck.length === 0,
      duplicatesAreRetries: keyMismatches.length === 0,
      oneRunPerKey: distinctRunIds === accepted.length,
      everySucceededNodeCalled: succeededNotCalled.length === 0,
      ...(sessions.length > 0 ? sessionsResult.gates : {}),
    };
    const result = {
      command: ['npm run chaos', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(
        ' ',
      ),
      settings: {
        runs: RUNS,
        seconds: SECONDS,
        workers: WORKERS,
        sessions: SESSIONS,
        messagesPerSession: MESSAGES,
        workerKillEveryMs: KILL_EVERY_MS,
        ...LOCKS,
        locks: flags['fast-locks'] ? 'fast (--fast-locks)' : "the workers' defaults",
        defaults: DEFAULT_LOCKS,
        redis: 'AOF appendfsync everysec',
        seed: SEED,
      },
      submitted: RUNS,
      accepted: accepted.length,
      refused: submissions.filter((s) => s.refused).map((s) => ({ key: s.key, why: s.refused })),
      postsRetried: submissions.reduce((n, s) => n + s.posts - 1, 0),
      runsPostedMoreThanOnce: submissions.filter((s) => s.posts > 1).length,
      distinctRunIds,
      faults: {
        workerKills: workerKills.length,
        /** Kill times skipped because fewer than two workers were ready. */
        workerKillsSkipped: skippedKills,
        api: faults.filter((f) => f.kind === 'api').map((f) => ({ at: round(f.at - t0), downMs: f.downMs })),
        redis: faults
          .filter((f) => f.kind === 'redis')
          .map((f) => ({ at: round(f.at - t0), downMs: f.downMs })),
        lastFaultAt: round(lastFault - t0),
      },
      settled: docs.size,
      statuses,
      notSucceeded: [...docs.values()]
        .filter((d) => d.status !== 'succeeded')
        .map((d) => ({
          runId: d.runId,
          status: d.status,
          error: d.error,
          nodes: Object.fromEntries(
            Object.entries(d.nodes)
              .filter(([, n]) => n.status !== 'succeeded')
              .map(([id, n]) => [id, n]),
          ),
        })),
      failedJobs,
      lost,
      missingAckedWithinFsyncWindow: missingInWindow,
      stuck,
      settleMsAfterLastFault: round(
        Math.max(0, ...[...docs.values()].map((d) => (d.finishedAt ? ms(d.finishedAt) : 0))) - lastFault,
      ),
      toolCalls: {
        total: work.length,
        nodes: byNode.size,
        nodesOfSettledRuns: nodesOfSettled,
        reExecuted,
        keyMismatches,
        succeededNotCalled: succeededNotCalled.length,
      },
      workerKillRecovery: {
        note: 'per kill: from the SIGKILL until the last of its in-flight calls completed on another worker',
        perKillMs: stats(recoveries),
        perKillIncludingRedisOverlapMs: stats(allRecoveries),
        perNodeMs: stats(nodeRecoveries),
        kills: perKill,
      },
      sessions: sessionsResult,
      apiExits,
      stalls,
      workerStartMs: stats(workerStartMs),
      gates,
      wallMs: round(settleEnded - started),
    };
    const markdown = chaosTable(result);
    process.stdout.write(`\n${markdown}\n`);
    const host = await machine();
    const stampFile = new Date().toISOString().replace(/[:.]/g, '-');
    mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
    const base = new URL(`./results/${stampFile}-chaos`, import.meta.url).pathname;
    writeFileSync(
      `${base}.json`,
      JSON.stringify({ ranAt: new Date().toISOString(), machine: host, results: { chaos: result } }, null, 2),
    );
    writeFileSync(
      `${base}.md`,
      `# Tetraloop chaos, ${new Date().toISOString()}\n\nMachine: ${JSON.stringify(host)}\nCommand: ${result.command}\n\n${markdown}\n`,
    );
    log(`wrote ${base}.json and .md`);
    return Object.values(gates).every(Boolean) ? 0 : 1;
  } finally {
    const left = [...processes];
    processes.clear();
    await Promise.all(left.map((p) => p.kill('SIGKILL')));
    await redis?.stop().catch(() => undefined);
    await tools?.close().catch(() => undefined);
    await model?.close().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

type ChaosResult = {
  settings: {
    runs: number;
    seconds: number;
    workers: number;
    sessions: number;
    messagesPerSession: number;
    TETRALOOP_LOCK_DURATION_MS: string;
    TETRALOOP_STALLED_INTERVAL_MS: string;
    TETRALOOP_MAX_STALLED_COUNT: string;
    locks: string;
  };
  submitted: number;
  accepted: number;
  postsRetried: number;
  runsPostedMoreThanOnce: number;
  distinctRunIds: number;
  faults: {
    workerKills: number;
    workerKillsSkipped: number;
    api: { at: number; downMs: number }[];
    redis: { at: number; downMs: number }[];
    lastFaultAt: number;
  };
  settled: number;
  statuses: Record<string, number>;
  failedJobs: Record<string, number>;
  lost: string[];
  missingAckedWithinFsyncWindow: string[];
  stuck: { runId: string }[];
  settleMsAfterLastFault: number;
  toolCalls: { total: number; nodes: number; reExecuted: number; keyMismatches: string[] };
  workerKillRecovery: {
    perKillMs: ReturnType<typeof stats>;
    perKillIncludingRedisOverlapMs: ReturnType<typeof stats>;
    perNodeMs: ReturnType<typeof stats>;
  };
  sessions: SessionsSummary;
  stalls: {
    total: number;
    distinctJobs: number;
    byQueue: Record<string, number>;
    byCause: Record<string, number>;
    handedBackAfterKillMs: ReturnType<typeof stats>;
  };
  workerStartMs: ReturnType<typeof stats>;
  gates: Record<string, boolean>;
};

function chaosTable(r: ChaosResult): string {
  const s = r.settings;
  const fmt = (x: ReturnType<typeof stats>): string =>
    x.n === 0 ? 'none measured' : `median ${x.median} ms, p95 ${x.p95} ms, max ${x.max} ms (n = ${x.n})`;
  const rows: [string, string][] = [
    [
      'settings',
      `${s.runs} runs and ${s.sessions} sessions × ${s.messagesPerSession} messages over ${s.seconds} s, ${s.workers} workers, lock ${s.TETRALOOP_LOCK_DURATION_MS} ms, stalled check ${s.TETRALOOP_STALLED_INTERVAL_MS} ms, max stalled count ${s.TETRALOOP_MAX_STALLED_COUNT} (${s.locks})`,
    ],
    [
      'faults',
      `${r.faults.workerKills} worker SIGKILLs (${r.faults.workerKillsSkipped} more skipped: fewer than 2 workers ready); API SIGKILL at ${r.faults.api.map((f) => `${f.at} ms (down ${f.downMs} ms)`).join(', ')}; Redis SIGKILL at ${r.faults.redis.map((f) => `${f.at} ms (down ${f.downMs} ms)`).join(', ')}`,
    ],
    [
      'accepted',
      `${r.accepted}/${r.submitted} (${r.runsPostedMoreThanOnce} runs needed a retried POST, ${r.postsRetried} retries; ${r.distinctRunIds} distinct run ids)`,
    ],
    [
      'settled',
      `${r.settled} (${Object.entries(r.statuses)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')})`,
    ],
    [
      'failed jobs (BullMQ, by reason)',
      Object.entries(r.failedJobs)
        .map(([k, v]) => `${v}× ${k}`)
        .join('; ') || 'none',
    ],
    ['lost (acked > 1 s before the Redis kill)', String(r.lost.length)],
    ['missing, acked within 1 s of the Redis kill', String(r.missingAckedWithinFsyncWindow.length)],
    ['stuck (not settled 5 min after the last fault)', String(r.stuck.length)],
    ['last run settled after the last fault', `${r.settleMsAfterLastFault} ms`],
    [
      'tool calls',
      `${r.toolCalls.total} for ${r.toolCalls.nodes} nodes: ${r.toolCalls.reExecuted} re-executed, ${r.toolCalls.keyMismatches.length} with a different Idempotency-Key`,
    ],
    ['worker-kill recovery, per kill', fmt(r.workerKillRecovery.perKillMs)],
    [
      'worker-kill recovery, per kill, with those overlapping the Redis restart',
      fmt(r.workerKillRecovery.perKillIncludingRedisOverlapMs),
    ],
    ['worker-kill recovery, per node', fmt(r.workerKillRecovery.perNodeMs)],
    [
      'jobs taken back from a worker (BullMQ stalled)',
      `${r.stalls.total} (${r.stalls.distinctJobs} jobs; ${Object.entries(r.stalls.byQueue)
        .map(([k, v]) => `${k} ${v}`)
        .join(
          ', ',
        )}; after a worker kill ${r.stalls.byCause.workerKill ?? 0}, after the Redis restart and no worker kill ${r.stalls.byCause.redisRestart ?? 0}, with no fault before ${r.stalls.byCause.noFault ?? 0})`,
    ],
    ["a killed worker's jobs handed back (kill → stalled), per kill", fmt(r.stalls.handedBackAfterKillMs)],
    ['worker start (spawn → ready)', fmt(r.workerStartMs)],
    ...sessionRows(r.sessions),
    [
      'gates',
      Object.entries(r.gates)
        .map(([k, v]) => `${k} ${v ? 'pass' : 'FAIL'}`)
        .join(', '),
    ],
  ];
  return ['| | |', '|---|---|', ...rows.map(([a, b]) => `| ${a} | ${b} |`)].join('\n');
}

function sessionRows(x: SessionsSummary): [string, string][] {
  if (x.sessions === 0) return [];
  const count = (n: number, what: string): string => `${n} ${what}`;
  return [
    [
      'session messages accepted',
      `${x.accepted}/${x.sent} sent (${x.sessions} sessions × ${x.messagesPerSession}; ${x.messagesPostedMoreThanOnce} needed a retried POST, ${x.postsRetried} retries, ${x.answeredNotYetPlaced} of them after a 202 not yet placed; ${x.answeredDuplicate} answered as duplicates; ${x.refused.length} refused)`,
    ],
    [
      'session messages answered',
      `${Object.entries(x.statuses)
        .map(([k, v]) => `${k} ${v}`)
        .join(
          ', ',
        )}; ${count(x.replies, 'replies in transcripts')} (${x.repliesMissing.length} succeeded runs without one, ${x.repliesRepeated.length} with more than one); ${count(x.unanswered.length, 'unanswered')} (${x.unanswered.filter((u) => u.inFsyncWindow).length} acked within 1 s of the Redis kill), ${count(x.answeredTwice.length, 'answered twice')}`,
    ],
    [
      'session order',
      `${count(x.outOfOrder.length, "runs started before the previous message's run settled")}; ${count(x.transcriptOutOfOrder.length, 'transcripts not in the order sent')}`,
    ],
    ['stuck lanes (busy 5 min after the last fault)', String(x.stuckLanes.length)],
    [
      'session lane handover (a run settled → the next one started)',
      x.handoverMs.n === 0
        ? 'none measured'
        : `median ${x.handoverMs.median} ms, p95 ${x.handoverMs.p95} ms, max ${x.handoverMs.max} ms (n = ${x.handoverMs.n})`,
    ],
    [
      'last session run settled after the last fault',
      x.lastRunSettledMsAfterLastFault === null ? 'none' : `${x.lastRunSettledMsAfterLastFault} ms`,
    ],
  ];
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `chaos failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
