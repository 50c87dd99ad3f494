/**
 * `tetraloop runs …` and `tetraloop explain`: a person reads runs through the API at
 * `TETRALOOP_API_URL` — a search as a table (`runs list`), one run with its nodes (`runs show`),
 * and where a run's time went with its critical path marked (`explain`). `--json` prints the API's
 * answer instead. Exit codes: 0 done, 1 the API said no (an unknown run, unreachable), 2 a usage
 * error.
 */
import { parseArgs } from 'node:util';
import {
  TetraloopApiError,
  type NodeView,
  type RunDocument,
  type RunExplain,
  type RunListing,
  type RunSearch,
  type TetraloopClient,
} from '@tetraloop/client';
import { clientOf, describeApiError, describeFailure, processClientIo, type ClientIo } from './api-client.js';
import { CommandError, UsageError, exitCodeOf, otherSubcommand, parsing } from './cli-args.js';
import { cut, formatMs, shortTime, textTable } from './text-table.js';

export const RUNS_USAGE = `usage: tetraloop runs <command>

  list [--status <status>] [--since <1h|ISO time>] [--until <…>] [--agent <agentId>]
       [--session <sessionKey>] [--tag <tag>] [--schedule <scheduleId>] [--trigger <triggerId>]
       [--limit N] [--cursor <nextCursor>] [--json]
                                        the runs, newest first, as a table
  show <runId> [--json]                 one run and its nodes

  tetraloop explain <runId> [--json]    where a run's time went, its critical path marked

Statuses: queued, running, succeeded, failed, cancelled, timed_out. --since and --until take a
duration before now (90s, 15m, 1h, 7d) or an ISO time (2026-11-30T05:00:00Z). The API is
TETRALOOP_API_URL (default http://localhost:3000); TETRALOOP_API_KEY, when set, is sent as its
bearer key (runs:read).`;

const RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TASK_CHARS = 48;

export type RunsIo = ClientIo;

const processIo = processClientIo;

/** Runs `tetraloop runs <args>`; answers the exit code. */
export async function runsCommand(args: readonly string[], io: RunsIo = processIo()): Promise<number> {
  return exitCode(io, async () => {
    const [command, ...rest] = args;
    switch (command) {
      case 'list':
        return list(rest, io);
      case 'show':
        return show(rest, io);
      default:
        return otherSubcommand(command, { command: 'runs', usage: RUNS_USAGE }, io.stdout);
    }
  });
}

/** Runs `tetraloop explain <args>`; answers the exit code. */
export async function explainCommand(args: readonly string[], io: RunsIo = processIo()): Promise<number> {
  return exitCode(io, async () => {
    const { runId, json } = runIdArg('explain', args);
    const answer = await ask((client) => client.explain(runId), io, runId);
    if (json) {
      io.stdout(`${JSON.stringify(answer, null, 2)}\n`);
      return 0;
    }
    io.stdout(explainText(answer));
    return 0;
  });
}

/** Runs a `runs` or `explain` command; an API it cannot reach, or that refuses the key, exits 1. */
const exitCode = (io: RunsIo, command: () => Promise<number>): Promise<number> =>
  exitCodeOf(io.stderr, command, (err) => describeFailure(err, 'TETRALOOP_API_KEY'));

async function list(args: readonly string[], io: RunsIo): Promise<number> {
  const { values, positionals } = parsing('runs list', () =>
    parseArgs({
      args: [...args],
      options: {
        status: { type: 'string' },
        since: { type: 'string' },
        until: { type: 'string' },
        agent: { type: 'string' },
        session: { type: 'string' },
        tag: { type: 'string' },
        schedule: { type: 'string' },
        trigger: { type: 'string' },
        limit: { type: 'string' },
        cursor: { type: 'string' },
        json: { type: 'boolean', default: false },
      },
      allowPositionals: true,
      strict: true,
    }),
  );
  if (positionals.length > 0) throw new UsageError(`runs list takes no arguments, got '${positionals[0]}'`);
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 200)) {
    throw new UsageError('runs list: --limit must be an integer from 1 to 200');
  }
  const given = {
    status: values.status,
    since: values.since,
    until: values.until,
    agentId: values.agent,
    sessionKey: values.session,
    tag: values.tag,
    scheduleId: values.schedule,
    triggerId: values.trigger,
    limit,
    cursor: values.cursor,
  };
  // The API checks each filter; what the command line left out is not sent.
  const search = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as RunSearch;
  let page;
  try {
    page = await clientOf(io.target).list(search);
  } catch (err) {
    // A filter the API refuses is the command line's mistake.
    if (err instanceof TetraloopApiError && err.status === 400) {
      throw new UsageError(`runs list: ${describeApiError(err, 'TETRALOOP_API_KEY')}`);
    }
    throw err;
  }
  if (values.json) {
    io.stdout(`${JSON.stringify(page, null, 2)}\n`);
    return 0;
  }
  if (page.runs.length === 0) io.stderr('no runs\n');
  else io.stdout(runsTable(page.runs));
  if (page.nextCursor) io.stderr(`more: add --cursor ${page.nextCursor}\n`);
  return 0;
}

async function show(args: readonly string[], io: RunsIo): Promise<number> {
  const { runId, json } = runIdArg('runs show', args);
  const doc = await ask((client) => client.get(runId), io, runId);
  if (json) {
    io.stdout(`${JSON.stringify(doc, null, 2)}\n`);
    return 0;
  }
  io.stdout(runText(doc));
  return 0;
}

function runIdArg(command: string, args: readonly string[]): { runId: string; json: boolean } {
  const { values, positionals } = parsing(command, () =>
    parseArgs({
      args: [...args],
      options: { json: { type: 'boolean', default: false } },
      allowPositionals: true,
      strict: true,
    }),
  );
  const [runId, ...extra] = positionals;
  if (runId === undefined) throw new UsageError(`${command} needs a run id: tetraloop ${command} <runId>`);
  if (extra.length > 0) throw new UsageError(`${command} takes one run id, got ${positionals.length}`);
  if (!RUN_ID.test(runId)) throw new UsageError(`${command}: '${runId}' is not a run id (a UUID)`);
  return { runId, json: values.json ?? false };
}

/** A read of one run; a 404 says the run is not there. */
async function ask<T>(call: (client: TetraloopClient) => Promise<T>, io: RunsIo, runId: string): Promise<T> {
  try {
    return await call(clientOf(io.target));
  } catch (err) {
    if (err instanceof TetraloopApiError && err.status === 404) {
      throw new CommandError(`no run ${runId} (it may be another tenant's, or expired)`);
    }
    throw err;
  }
}

const nodesCell = (n: RunListing['nodes']): string =>
  `${n.succeeded}/${n.total}${n.failed > 0 ? ` (${n.failed} failed)` : ''}`;

/** Runs as a table, one line each. */
export function runsTable(runs: readonly RunListing[]): string {
  return textTable(
    ['RUN', 'STATUS', 'AGENT', 'CREATED', 'DURATION', 'NODES', 'TOKENS', 'TAGS', 'TASK'],
    runs.map((r) => [
      r.runId,
      r.status,
      r.agentId,
      shortTime(r.createdAt),
      formatMs(r.durationMs),
      nodesCell(r.nodes),
      String(r.usage.totalTokens),
      r.tags.join(',') || '-',
      r.task
        ? cut(r.task, TASK_CHARS)
        : r.rerunOf
          ? `rerun of ${r.rerunOf.runId} from ${r.rerunOf.from}`
          : '-',
    ]),
  );
}

const nodeError = (node: NodeView): string =>
  'error' in node && node.error ? `${node.error.code}: ${cut(node.error.message, 60)}` : '';

const nodeDuration = (node: NodeView): string =>
  'finishedAt' in node && node.startedAt
    ? formatMs(Date.parse(node.finishedAt) - Date.parse(node.startedAt))
    : '-';

/** One run: its header fields, then its nodes as a table. */
export function runText(doc: RunDocument): string {
  const duration =
    doc.finishedAt === null ? null : Date.parse(doc.finishedAt) - Date.parse(doc.startedAt ?? doc.createdAt);
  const fields: [string, string][] = [
    ['run', doc.runId],
    ['status', doc.status],
    ['agent', doc.agentId],
    ...(doc.sessionKey ? ([['session', doc.sessionKey]] as [string, string][]) : []),
    ...(doc.task ? ([['task', cut(doc.task, 200)]] as [string, string][]) : []),
    ['created', shortTime(doc.createdAt)],
    ['started', shortTime(doc.startedAt)],
    ['finished', shortTime(doc.finishedAt)],
    ['duration', formatMs(duration)],
    [
      'usage',
      `${doc.usage.toolCalls} tool calls, ${formatMs(doc.usage.toolTimeMs)} tool time, ${doc.usage.totalTokens} tokens`,
    ],
    ...(doc.tags.length > 0 ? ([['tags', doc.tags.join(', ')]] as [string, string][]) : []),
    ...(doc.rerunOf
      ? ([['rerun of', `${doc.rerunOf.runId} from ${doc.rerunOf.from}`]] as [string, string][])
      : []),
    ...(doc.error ? ([['error', `${doc.error.code}: ${doc.error.message}`]] as [string, string][]) : []),
  ];
  const header = fields.map(([k, v]) => `${`${k}:`.padEnd(10)}${v}`).join('\n');
  const nodes = textTable(
    ['NODE', 'STATUS', 'ATTEMPTS', 'DURATION', 'ERROR'],
    Object.values(doc.nodes).map((n) => [
      n.id,
      'reusedFrom' in n && n.reusedFrom ? `${n.status} (reused)` : n.status,
      String(n.attempts.length),
      nodeDuration(n),
      nodeError(n),
    ]),
  );
  return `${header}\n\n${nodes}`;
}

/** An explanation: the run's figures, each node's times with `*` on the critical path, the path. */
export function explainText(e: RunExplain): string {
  const ratio = (r: number | null): string => (r === null ? '-' : r.toFixed(2));
  const head = [
    `run ${e.runId}  ${e.status}`,
    `wall ${formatMs(e.wallMs)}  critical path ${formatMs(e.criticalPathMs)}  node time ${formatMs(e.nodeTimeMs)}`,
    `parallelism ${ratio(e.parallelism)} (node time ÷ wall)  wall ÷ critical path ${ratio(e.wallOverCriticalPath)}  tokens ${e.totals.tokens}`,
  ].join('\n');
  const table = textTable(
    ['', 'NODE', 'STATUS', 'QUEUE', 'EXEC', 'RETRY', 'THROTTLED', 'PARKED', 'TOTAL', 'ATTEMPTS', 'TOKENS'],
    e.nodes.map((n) => [
      n.critical ? '*' : '',
      n.id,
      n.reused ? `${n.status} (reused)` : n.status,
      formatMs(n.queueWaitMs),
      formatMs(n.executionMs),
      formatMs(n.retryWaitMs),
      formatMs(n.throttledMs),
      formatMs(n.parkedMs),
      formatMs(n.durationMs),
      String(n.attempts),
      String(n.tokens),
    ]),
  );
  const path =
    e.criticalPath.length === 0
      ? 'critical path: none (no node took time)'
      : `critical path (*): ${e.criticalPath.map((n) => `${n.id} ${formatMs(n.durationMs)}`).join(' → ')}`;
  const maps = e.nodes.flatMap((n) =>
    n.map
      ? [
          `map ${n.id}: ${n.map.ran} of ${n.map.total} items ran, ${n.map.concurrency} at once; wall ${formatMs(n.durationMs)}, items' critical path ${formatMs(n.map.itemsCriticalPathMs)} (lane ${n.map.criticalLane ?? '-'}), wall ÷ path ${ratio(n.map.wallOverItemsCriticalPath)}; longest item ${formatMs(n.map.longestItemMs)}, item time ${formatMs(n.map.itemTimeMs)}`,
        ]
      : [],
  );
  return `${head}\n\n${table}\n${path}\n${maps.map((line) => `${line}\n`).join('')}`;
}
