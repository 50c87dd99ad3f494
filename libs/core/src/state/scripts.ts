/**
 * Loads the Lua scripts next to this file and calls them (EVAL on a socket's first call, EVALSHA after), all
 * from one table (`SCRIPT_FILES`). Every run script gets `run.lib.lua` prepended (the event
 * emitter and the steps several scripts share), so events are appended in the same atomic step as
 * the state change they describe, and runs as a function followed by `keepTtl()`, so a key it
 * created carries the run's TTL.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Command } from 'ioredis';
import { isCluster, type RedisClient } from './redis-client.js';
import { slotMulti } from './slot-multi.js';

/**
 * Every script, under the folder its file is in (`<folder>/<name>.lua`, the name ending in its
 * number of keys). A folder holds the scripts over one family of keys, loaded alike (`LOADERS`):
 * - `lua/`: one run's keys (`runKeyList`), each with `run.lib.lua` first;
 * - `lua-session/`: one session's keys, each with `session.lib.lua` first, ending by giving the
 *   session's keys their idle TTL (the reads in SESSION_READS excepted); the caller appends the idle
 *   TTL and the transcript cap to its arguments;
 * - `lua-memory/`: one agent's memory, each with `memory.lib.lua` first, ending by giving the
 *   agent's keys their idle TTL; the caller appends the idle TTL to its arguments;
 * - `lua-plan/`: one plan cache entry; `lua-secret/`: one tenant's secrets; `lua-tenant/`: one
 *   tenant's capped registries (webhook subscriptions, triggers, schedules) and its store items;
 *   `lua-trigger/`: one tenant's triggers, events, batches and debounces; `lua-limits/`: one
 *   tenant's rate buckets and running slots;
 * - `lua-flow/`: flow control's counters and queues, each with `flow.lib.lua` first.
 */
export const SCRIPT_FILES = {
  lua: [
    'create-run-6',
    'start-run-6',
    'begin-node-6',
    'begin-carried-6',
    'record-attempt-6',
    'record-iteration-6',
    'complete-node-6',
    'decide-run-6',
    'settle-run-6',
    'resume-run-6',
    'signal-6',
    'wait-state-6',
    'sleep-state-6',
    'add-child-6',
    'append-event-6',
    'set-plan-6',
    'charge-6',
    'request-replan-6',
    'replan-6',
    'end-unstarted-6',
    'environment-changed-6',
    'throttle-node-6',
    'map-start-6',
    'complete-item-6',
    'mark-followed-up-6',
  ],
  'lua-session': [
    'session-append-5',
    'session-transcript-5',
    'lane-admit-6',
    'session-reply-6',
    'lane-advance-5',
    'lane-commit-collect-5',
    'lane-stop-5',
    'session-reset-5',
    'session-history-5',
    'session-compact-5',
  ],
  'lua-memory': ['record-run-4', 'save-reflection-4', 'set-lesson-status-4'],
  'lua-plan': ['forget-cached-plan-1', 'drop-deadline-1'],
  'lua-secret': ['put-secret-3', 'delete-secret-3'],
  'lua-tenant': ['add-capped-1', 'put-item-1'],
  'lua-trigger': ['record-event-2', 'batch-add-3', 'batch-take-2', 'debounce-note-1', 'debounce-done-1'],
  'lua-limits': ['take-tokens-2', 'acquire-slot-2', 'release-slot-2', 'forget-slots-2', 'held-slots-2'],
  'lua-flow': ['flow-acquire-5', 'flow-release-4', 'flow-tick-3', 'flow-penalize-1'],
} as const;

type ScriptFolder = keyof typeof SCRIPT_FILES;
export type ScriptName = (typeof SCRIPT_FILES)[ScriptFolder][number];

const read = (dir: string, file: string): string =>
  readFileSync(new URL(`./${dir}/${file}`, import.meta.url), 'utf8');
const LIB = read('lua', 'run.lib.lua');
/**
 * A run script as loaded: the library, its body, then the TTL check of keys it created
 * (run.lib.lua). For a Redis Cluster (`deferIndex`) the search index writes are not made but
 * returned first, `{writes JSON, result}`, for `applyIndexWrites` to make in their own slots.
 */
const runScript = (body: string, deferIndex: boolean): string =>
  `local INDEX_DEFERRED = ${deferIndex}\n${LIB}\nlocal function body()\n${body}\nend\n` +
  `local result = body()\nkeepTtl()\n` +
  (deferIndex ? `return { #indexWrites > 0 and cjson.encode(indexWrites) or '', result }` : 'return result');
const RUN_SCRIPT_NAMES: ReadonlySet<string> = new Set(SCRIPT_FILES.lua);
const MEMORY_LIB = read('lua-memory', 'memory.lib.lua');
const memoryScript = (body: string): string =>
  `${MEMORY_LIB}\nlocal function body()\n${body}\nend\nlocal result = body()\ntouch()\nreturn result`;
const SESSION_LIB = read('lua-session', 'session.lib.lua');
/** Session scripts that write nothing, so do not keep the session alive. */
const SESSION_READS: ReadonlySet<ScriptName> = new Set(['session-transcript-5']);
/** A session script as loaded: the library, then its body, then the TTL refresh of every write. */
const sessionScript = (name: ScriptName, body: string): string =>
  `${SESSION_LIB}\nlocal function body()\n${body}\nend\n` +
  `local result = body()\n${SESSION_READS.has(name) ? '' : 'touch()\n'}return result`;
const FLOW_LIB = read('lua-flow', 'flow.lib.lua');

/** How each folder's scripts are loaded: the Lua text sent for a script, from its file's text. */
const LOADERS: Record<ScriptFolder, (name: ScriptName, body: string, deferIndex: boolean) => string> = {
  lua: (_, body, deferIndex) => runScript(body, deferIndex),
  'lua-session': (name, body) => sessionScript(name, body),
  'lua-memory': (_, body) => memoryScript(body),
  'lua-plan': (_, body) => body,
  'lua-secret': (_, body) => body,
  'lua-tenant': (_, body) => body,
  'lua-trigger': (_, body) => body,
  'lua-limits': (_, body) => body,
  'lua-flow': (_, body) => `${FLOW_LIB}\n${body}`,
};

const keysOf = (name: string): number => Number(name.slice(name.lastIndexOf('-') + 1));

interface ScriptSource {
  readonly lua: string;
  /** SHA-1 of `lua`: what EVALSHA names the script by. */
  readonly sha: string;
  readonly numberOfKeys: number;
  /** The sockets (one per connection, or per node of a cluster) the script was sent on in full. */
  readonly sentOn: WeakSet<object>;
}

const sourcesOf = (deferIndex: boolean) =>
  new Map<ScriptName, ScriptSource>(
    (Object.keys(SCRIPT_FILES) as ScriptFolder[]).flatMap((folder) =>
      SCRIPT_FILES[folder].map((name: ScriptName) => {
        const lua = LOADERS[folder](name, read(folder, `${name}.lua`), deferIndex);
        const sha = createHash('sha1').update(lua).digest('hex');
        return [name, { lua, sha, numberOfKeys: keysOf(name), sentOn: new WeakSet() }] as const;
      }),
    ),
  );

export type ScriptRunner = (
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number)[],
) => Promise<unknown>;

const SOURCES = { single: sourcesOf(false), cluster: sourcesOf(true) };

/** Every script's SHA-1 on one Redis, by name: what EVALSHA names it by (and a profile reads). */
export const scriptShas = (): ReadonlyMap<ScriptName, string> =>
  new Map([...SOURCES.single].map(([name, { sha }]) => [name, sha]));

/**
 * A typed caller of every script on `redis`. On a Redis Cluster a run script's search index writes
 * are made after it, by the caller, before it answers.
 *
 * A call is an EVAL of the script's text on a socket it was not sent on yet, and an EVALSHA after
 * (`ScriptCall`). The scripts are not defined as ioredis commands: ioredis copies every command
 * defined on a connection into each pipeline it builds (`slotMulti`'s), and these would be most of
 * that copy.
 */
export function loadScripts(redis: RedisClient): ScriptRunner {
  const deferIndex = isCluster(redis);
  const sources = deferIndex ? SOURCES.cluster : SOURCES.single;
  return async (name, keys, args) => {
    const source = sources.get(name);
    if (!source) throw new Error(`script ${name} is not loaded`);
    const reply = await evalScript(redis, source, keys, args);
    if (!deferIndex || !RUN_SCRIPT_NAMES.has(name)) return reply;
    const [writes, result = null] = reply as [string, unknown?];
    if (writes) await applyIndexWrites(redis, JSON.parse(writes) as IndexWrite[]);
    return result;
  };
}

/**
 * One call of a script: sent as EVAL with its text on a socket it was not sent on yet (or when
 * `inFull`), as EVALSHA after. Redis keeps a script it ran until it restarts or its cache is
 * flushed, and a new socket is how a restart (a failover, another node) shows: so a call does not
 * answer NOSCRIPT, and it runs where it was sent among the commands around it. A NOSCRIPT answer
 * sent again would run after what was sent behind it, and the API sends a run's create and its root
 * job's add together.
 */
class ScriptCall extends Command {
  /** The socket the call was last written to. */
  socket: object | undefined;

  constructor(
    private readonly source: ScriptSource,
    keys: readonly string[],
    args: readonly (string | number)[],
    private readonly inFull = false,
  ) {
    super('evalsha', [source.sha, source.numberOfKeys, ...keys, ...args], { replyEncoding: 'utf8' });
  }

  override toWritable(socket: object): string | Buffer {
    const { sentOn } = this.source;
    // Written again elsewhere: the last write was redirected (a cluster's MOVED, ASK, TRYAGAIN) or
    // its socket lost, so a text it carried was not run, and not kept, there.
    if (this.socket && this.socket !== socket) this.forgetSocket();
    this.socket = socket;
    if (this.inFull || !sentOn.has(socket)) {
      sentOn.add(socket);
      this.name = 'eval';
      this.args[0] = this.source.lua;
    } else if (this.name === 'eval') {
      // Redirected from a socket it was new to, to one that has it.
      this.name = 'evalsha';
      this.args[0] = this.source.sha;
    }
    return super.toWritable(socket);
  }

  /**
   * After an error answer (or a write elsewhere): a text this call carried may not have been run,
   * so its socket is not known to have the script (a BUSY server refuses it unrun).
   */
  forgetSocket(): void {
    if (this.name === 'eval' && this.socket) this.source.sentOn.delete(this.socket);
  }
}

/**
 * Calls a script. A NOSCRIPT answer (the cache flushed under a live socket) sends it once more, in
 * full; it then runs after what was sent behind it.
 */
async function evalScript(
  redis: RedisClient,
  source: ScriptSource,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await send(redis, new ScriptCall(source, keys, args));
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return send(redis, new ScriptCall(source, keys, args, true));
  }
}

/** Sends `call` and answers its reply; an error answer forgets the socket it may have loaded. */
async function send(redis: RedisClient, call: ScriptCall): Promise<unknown> {
  redis.sendCommand(call);
  try {
    return await call.promise;
  } catch (err) {
    call.forgetSocket();
    throw err;
  }
}

/** An index write a run script listed (run.lib.lua, `indexWrites`): a search index, the queued runs', the deadlines. */
type IndexWrite =
  ['add', string, number, string, number] | ['set', string, number, string] | ['rem', string, string];

/**
 * Makes a run script's index writes, each index in its own slot: adds trim the index by
 * score and give it its TTL, as the script does on one Redis. Each write is idempotent, so a
 * script retried after a lost reply writes the same again. A process that stops between the
 * script and these writes leaves the run out of (or stale in) an index until its next status
 * change; a search checks each run's own fields, so a stale entry is never listed wrongly, and the
 * reconciler drops an entry of the queued runs' index whose run has started.
 */
async function applyIndexWrites(redis: RedisClient, writes: readonly IndexWrite[]): Promise<void> {
  const tx = slotMulti(redis);
  for (const write of writes) {
    if (write[0] === 'rem') {
      tx.zrem(write[1], write[2]);
      continue;
    }
    if (write[0] === 'set') {
      tx.zadd(write[1], write[2], write[3]);
      continue;
    }
    const [, key, score, id, keepMs] = write;
    tx.zadd(key, score, id)
      .zremrangebyscore(key, '-inf', `(${score - keepMs}`)
      .pexpire(key, keepMs);
  }
  await tx.exec();
}
