/**
 * Where a workload's Redis commands go: every command Redis executes while `work` runs, read with
 * MONITOR, grouped by what sent it — a Tetraloop run script, a BullMQ script (each named from the
 * SHA-1 of its Lua text) or a plain command — with the commands each script ran inside it. MONITOR
 * lists a script's call just before the commands it runs, and a script runs alone, so each command
 * a script ran follows its call. MONITOR slows Redis down: profile a small batch apart from the
 * measured one.
 */
import { createHash } from 'node:crypto';
import * as bullScripts from 'bullmq/dist/esm/scripts/index.js';
import { appendFileSync } from 'node:fs';
import { scriptShas } from '@tetraloop/core/state';
import { monitorArgs, monitorWhile } from '../../test/support/monitor.js';

export { monitorArgs };

export interface ProfileRow {
  /** `script <name>` (Tetraloop), `bullmq <name>`, or a plain command's name. */
  source: string;
  /** Calls per item (script calls, or the command's own count). */
  calls: number;
  /** Redis commands per item: a script's call and every command it ran. */
  commands: number;
  /** For a script: the commands it ran most, per item. */
  inside: string;
  /** For a script: every command it ran, per item. */
  ran: Record<string, number>;
}

const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex');

/** SHA-1 of each known script's Lua text → its name, as EVALSHA names it. */
function knownScripts(): Map<string, string> {
  const names = new Map<string, string>();
  for (const [name, sha] of scriptShas()) names.set(sha, `script ${name}`);
  for (const script of Object.values(bullScripts) as { name?: string; content?: string }[]) {
    if (script?.name && script.content) names.set(sha1(script.content), `bullmq ${script.name}`);
  }
  return names;
}

/**
 * Runs `work` under MONITOR and returns its commands per item (`items`: nodes or jobs), most first.
 * With BENCH_MONITOR_LOG=<file>, every line MONITOR gave is also written there (which keys each
 * command touched).
 */
export async function profileRedis<T>(
  redisUrl: string,
  items: number,
  work: () => Promise<T>,
): Promise<{ result: T; rows: ProfileRow[] }> {
  const names = knownScripts();
  const totals = new Map<string, { calls: number; commands: number; inside: Map<string, number> }>();
  let current: ReturnType<typeof totals.get>;
  const entry = (source: string) => {
    let e = totals.get(source);
    if (!e) totals.set(source, (e = { calls: 0, commands: 0, inside: new Map() }));
    return e;
  };
  const logged: string[] | undefined = process.env.BENCH_MONITOR_LOG ? [] : undefined;
  const onLine = (line: string): void => {
    logged?.push(line);
    const parsed = monitorArgs(line);
    if (!parsed) return;
    const { source, args } = parsed;
    const command = (args[0] ?? '').toLowerCase();
    if (source === 'lua') {
      if (!current) return;
      current.commands += 1;
      current.inside.set(command, (current.inside.get(command) ?? 0) + 1);
      return;
    }
    if (command === 'evalsha' || command === 'eval') {
      const sha = command === 'eval' ? sha1(args[1] ?? '') : (args[1] ?? '');
      current = entry(names.get(sha) ?? `script ${sha.slice(0, 8)}`);
      current.calls += 1;
      current.commands += 1;
      return;
    }
    current = undefined;
    const e = entry(command);
    e.calls += 1;
    e.commands += 1;
  };
  try {
    // Until a marker sent once `work` is done comes through: every command of the work is before it.
    const result = await monitorWhile(redisUrl, onLine, work);
    if (result instanceof Error) throw result;
    const per = (n: number): number => Number((n / items).toFixed(2));
    const rows = [...totals]
      .map(([source, e]) => ({
        source,
        calls: per(e.calls),
        commands: per(e.commands),
        inside: [...e.inside]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 8)
          .map(([c, n]) => `${c} ${per(n)}`)
          .join(', '),
        ran: Object.fromEntries([...e.inside].map(([c, n]) => [c, per(n)])),
      }))
      .sort((a, b) => b.commands - a.commands);
    return { result, rows };
  } finally {
    if (logged) appendFileSync(process.env.BENCH_MONITOR_LOG!, `${logged.join('\n')}\n`);
  }
}

/** The profile as a table, with its total. */
export function profileTable(rows: readonly ProfileRow[], item: string): string {
  const total = profileTotal(rows);
  return [
    `| sent as | calls per ${item} | Redis commands per ${item} | most run inside, per ${item} |`,
    '|---|---:|---:|---|',
    ...rows
      .filter((r) => r.commands >= 0.05)
      .map((r) => `| ${r.source} | ${r.calls} | ${r.commands} | ${r.inside} |`),
    `| **total** | | **${total.toFixed(1)}** | |`,
  ].join('\n');
}

/** How one profile's row differs from the base's: commands per item, and per command run inside. */
export interface ProfileDelta {
  source: string;
  commands: number;
  /** Commands run inside whose count changed, by how much per item. */
  ran: Record<string, number>;
}

const rounded = (n: number): number => Number(n.toFixed(2));

/** The rows whose commands per item differ from `base` by at least `least`, largest change first. */
export function profileDelta(
  base: readonly ProfileRow[],
  other: readonly ProfileRow[],
  least = 0.05,
): ProfileDelta[] {
  const bySource = (rows: readonly ProfileRow[]) => new Map(rows.map((r) => [r.source, r]));
  const a = bySource(base);
  const b = bySource(other);
  const deltas: ProfileDelta[] = [];
  for (const source of new Set([...a.keys(), ...b.keys()])) {
    const before = a.get(source);
    const after = b.get(source);
    const commands = rounded((after?.commands ?? 0) - (before?.commands ?? 0));
    if (Math.abs(commands) < least) continue;
    const ran: Record<string, number> = {};
    for (const c of new Set([...Object.keys(before?.ran ?? {}), ...Object.keys(after?.ran ?? {})])) {
      const d = rounded((after?.ran[c] ?? 0) - (before?.ran[c] ?? 0));
      if (Math.abs(d) >= least) ran[c] = d;
    }
    deltas.push({ source, commands, ran });
  }
  return deltas.sort((x, y) => Math.abs(y.commands) - Math.abs(x.commands));
}

/** The total commands per item of a profile. */
export const profileTotal = (rows: readonly ProfileRow[]): number =>
  rounded(rows.reduce((a, r) => a + r.commands, 0));
