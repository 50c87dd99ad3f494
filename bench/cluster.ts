/**
 * Redis Cluster: how a Tetraloop load divides over the masters. The same batch (runs of 10 fast
 * `json` nodes, submitted through the library and settled by one plan and one tool worker
 * process) on one redis-server, then on a 3-master Redis Cluster with 1 queue shard and with
 * `TETRALOOP_QUEUE_SHARDS` = 3 and 6. For each master: its share of the Redis commands (INFO
 * commandstats, those inside scripts included), of the Redis CPU µs commandstats counts, and of
 * the CPU its process spent (/proc); each against an even share.
 *
 * This machine has 2 cores for every process, so throughput does not grow here: the division is
 * what the numbers show; docs/benchmarks.md extrapolates from it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { parseApiEnv, startApi } from '@tetraloop/api';
import { startRedisCluster, startRedisServer } from '@tetraloop/core/runtime';
import { commandCounts, cpuMsOf } from './support/cpu.js';
import { libraryDriver } from './support/library-driver.js';
import { NODES_PER_RUN, graph, stopAll } from './throughput.js';

const RUNS = 300;
const CONCURRENCY = 32;
const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface MasterShare {
  /** Per node: commands this master executed, and Redis CPU µs by commandstats. */
  commands: number;
  usec: number;
  /** CPU ms of this master's process per node (/proc). */
  cpuMs: number | null;
  /** This master's share of all commands / CPU µs / process CPU, in % of the total. */
  commandShare: number;
  usecShare: number;
  cpuShare: number | null;
}

export interface ClusterRow {
  setup: string;
  masters: number;
  shards: number;
  nodesPerSecond: number;
  /** Commands per node over every master. */
  commandsPerNode: number;
  perMaster: MasterShare[];
  /** The largest distance of a master's share from an even one, in % of that even share. */
  worstDeviation: { commands: number; usec: number; cpu: number | null };
}

export interface ClusterResult {
  rows: ClusterRow[];
  settings: Record<string, unknown>;
}

interface Masters {
  readonly url: string;
  readonly nodes: readonly string[];
  readonly pids: readonly number[];
  stop(): Promise<void>;
}

async function startMasters(count: number): Promise<Masters> {
  if (count === 1) {
    const server = await startRedisServer();
    return { url: server.url, nodes: [server.url], pids: [server.pid], stop: server.stop };
  }
  const cluster = await startRedisCluster({ masters: count });
  return { url: cluster.url, nodes: cluster.masters, pids: cluster.pids, stop: cluster.stop };
}

/** Commands, commandstats µs and process CPU of each master, read together. */
async function readMasters(
  masters: Masters,
): Promise<{ commands: number; usec: number; cpu: number | null }[]> {
  return Promise.all(
    masters.nodes.map(async (url, i) => {
      const node = new Redis(url);
      try {
        const { commands, usec } = await commandCounts(() => node.info('commandstats'));
        return { commands, usec, cpu: cpuMsOf(masters.pids[i]!) };
      } finally {
        node.disconnect();
      }
    }),
  );
}

async function measure(count: number, shards: number, log: (line: string) => void): Promise<ClusterRow> {
  const masters = await startMasters(count);
  const env = {
    REDIS_URL: masters.url,
    TETRALOOP_PREFIX: `bench-${randomUUID().slice(0, 8)}`,
    TETRALOOP_QUEUE_SHARDS: String(shards),
    LOG_LEVEL: 'silent',
    TETRALOOP_HTTP_ALLOW_HOSTS: '127.0.0.1',
    PORT: '0',
    HOST: '127.0.0.1',
    TETRALOOP_AUTH: 'off',
  };
  const api = await startApi(parseApiEnv(env));
  const worker = (pool: 'plan' | 'tool'): ChildProcess =>
    spawn(process.execPath, ['apps/cli/bin/tetraloop.mjs', 'worker', '--pool', pool], {
      cwd: ROOT,
      env: { ...process.env, ...env, TETRALOOP_TOOL_CONCURRENCY: String(CONCURRENCY) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  const children = [worker('plan'), worker('tool')];
  const driver = libraryDriver(api);
  const batch = async (runs: number): Promise<number> => {
    const started = performance.now();
    const ids = await Promise.all(Array.from({ length: runs }, () => driver.submit({ graph: graph() })));
    const statuses = await Promise.all(ids.map((id) => driver.settle(id)));
    const bad = statuses.filter((s) => s !== 'succeeded');
    if (bad.length > 0) throw new Error(`${bad.length} runs did not succeed, e.g. ${bad[0]}`);
    return (performance.now() - started) / 1000;
  };
  try {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve, reject) => {
            let err = '';
            c.stderr!.on(
              'data',
              (d: Buffer) => (err += d.toString()) && /worker ready/.test(err) && resolve(),
            );
            c.once('exit', (code) => reject(new Error(`worker exited with ${code}: ${err}`)));
          }),
      ),
    );
    await batch(20);
    const before = await readMasters(masters);
    const seconds = await batch(RUNS);
    const after = await readMasters(masters);
    const nodes = RUNS * NODES_PER_RUN;
    const deltas = after.map((a, i) => ({
      commands: a.commands - before[i]!.commands,
      usec: a.usec - before[i]!.usec,
      cpu: a.cpu === null || before[i]!.cpu === null ? null : a.cpu - before[i]!.cpu,
    }));
    const sum = (f: (d: (typeof deltas)[number]) => number): number => deltas.reduce((s, d) => s + f(d), 0);
    const total = { commands: sum((d) => d.commands), usec: sum((d) => d.usec), cpu: sum((d) => d.cpu ?? 0) };
    const pct = (v: number, t: number): number => Number(((100 * v) / t).toFixed(1));
    const perMaster = deltas.map((d) => ({
      commands: Number((d.commands / nodes).toFixed(2)),
      usec: Number((d.usec / nodes).toFixed(2)),
      cpuMs: d.cpu === null ? null : Number((d.cpu / nodes).toFixed(3)),
      commandShare: pct(d.commands, total.commands),
      usecShare: pct(d.usec, total.usec),
      cpuShare: d.cpu === null || total.cpu === 0 ? null : pct(d.cpu, total.cpu),
    }));
    const even = 100 / count;
    const worst = (shares: (number | null)[]): number | null =>
      shares.some((s) => s === null)
        ? null
        : Number(Math.max(...shares.map((s) => (Math.abs(s! - even) / even) * 100)).toFixed(1));
    const row: ClusterRow = {
      setup: count === 1 ? 'one redis-server' : `${count}-master cluster`,
      masters: count,
      shards,
      nodesPerSecond: Math.round(nodes / seconds),
      commandsPerNode: Number((total.commands / nodes).toFixed(1)),
      perMaster,
      worstDeviation: {
        commands: worst(perMaster.map((m) => m.commandShare))!,
        usec: worst(perMaster.map((m) => m.usecShare))!,
        cpu: worst(perMaster.map((m) => m.cpuShare)),
      },
    };
    log(
      `  ${row.setup}, ${shards} shard(s): ${row.nodesPerSecond} nodes/s; commands by master ${perMaster.map((m) => `${m.commandShare}%`).join(' / ')}`,
    );
    return row;
  } finally {
    await stopAll(children);
    await api.close();
    await masters.stop();
  }
}

/** The setups measured, as [masters, queue shards]. */
const SETUPS: readonly (readonly [number, number])[] = [
  [1, 1],
  [3, 1],
  [3, 3],
  [3, 6],
];

export async function runCluster(
  log: (line: string) => void = console.log,
  setups = SETUPS,
): Promise<ClusterResult> {
  const rows: ClusterRow[] = [];
  for (const [masters, shards] of setups) {
    rows.push(await measure(masters, shards, log));
  }
  return {
    rows,
    settings: {
      runs: RUNS,
      nodesPerRun: NODES_PER_RUN,
      graph: 'as the throughput benchmark: src → 8 parallel → join, all json tool nodes',
      processes:
        'one plan and one tool `tetraloop worker` process; the API in the bench process (library driver)',
      toolConcurrency: CONCURRENCY,
    },
  };
}

const cell = (v: number | null): string => (v === null ? 'n/a' : String(v));

export function clusterTable(result: ClusterResult): string {
  const lines = [
    '| setup | queue shards | nodes/s | commands per node | commands by master (%) | Redis CPU µs by master (%) | process CPU by master (%) | worst master vs even share: commands / µs / CPU |',
    '|---|---:|---:|---:|---|---|---|---|',
  ];
  for (const r of result.rows) {
    const shares = (f: (m: MasterShare) => number | null): string =>
      r.perMaster.map((m) => cell(f(m))).join(' / ');
    lines.push(
      `| ${r.setup} | ${r.shards} | ${r.nodesPerSecond} | ${r.commandsPerNode} | ${shares((m) => m.commandShare)} | ${shares((m) => m.usecShare)} | ${shares((m) => m.cpuShare)} | ${r.worstDeviation.commands} % / ${r.worstDeviation.usec} % / ${cell(r.worstDeviation.cpu)} % |`,
    );
  }
  lines.push(
    '',
    `${RUNS} runs × ${NODES_PER_RUN} nodes per setup. Per master and per node: commands, commandstats µs and process CPU ms:`,
    '',
    '| setup | queue shards | master | commands | Redis CPU µs | process CPU ms |',
    '|---|---:|---:|---:|---:|---:|',
  );
  for (const r of result.rows) {
    r.perMaster.forEach((m, i) =>
      lines.push(`| ${r.setup} | ${r.shards} | ${i + 1} | ${m.commands} | ${m.usec} | ${cell(m.cpuMs)} |`),
    );
  }
  return lines.join('\n');
}
