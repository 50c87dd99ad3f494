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
import { Redis } from 'ioredis';
import { scriptSources } from '@tetraloop/core/state';

export interface ProfileRow {
  /** `script <name>` (Tetraloop), `bullmq <name>`, or a plain command's name. */
  source: string;
  /** Calls per item (script calls, or the command's own count). */
  calls: number;
  /** Redis commands per item: a script's call and every command it ran. */
  commands: number;
  /** For a script: the commands it ran most, per item. */
  inside: string;
}

const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex');

/** SHA-1 of each known script's Lua text → its name, as EVALSHA names it. */
function knownScripts(): Map<string, string> {
  const names = new Map<string, string>();
  for (const [name, lua] of scriptSources()) names.set(sha1(lua), `script ${name}`);
  for (const script of Object.values(bullScripts) as { name?: string; content?: string }[]) {
    if (script?.name && script.content) names.set(sha1(script.content), `bullmq ${script.name}`);
  }
  return names;
}

/** Runs `work` under MONITOR and returns its commands per item (`items`: nodes or jobs), most first. */
export async function profileRedis<T>(
  redisUrl: string,
  items: number,
  work: () => Promise<T>,
): Promise<{ result: T; rows: ProfileRow[] }> {
  const names = knownScripts();
  const client = new Redis(redisUrl);
  const monitor = await client.monitor();
  const totals = new Map<string, { calls: number; commands: number; inside: Map<string, number> }>();
  let current: ReturnType<typeof totals.get>;
  const entry = (source: string) => {
    let e = totals.get(source);
    if (!e) totals.set(source, (e = { calls: 0, commands: 0, inside: new Map() }));
    return e;
  };
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
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
  });
  try {
    const result = await work();
    // Lets MONITOR's last lines arrive.
    await new Promise((r) => setTimeout(r, 200));
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
      }))
      .sort((a, b) => b.commands - a.commands);
    return { result, rows };
  } finally {
    monitor.disconnect();
    client.disconnect();
  }
}

/** The profile as a table, with its total. */
export function profileTable(rows: readonly ProfileRow[], item: string): string {
  const total = rows.reduce((a, r) => a + r.commands, 0);
  return [
    `| sent as | calls per ${item} | Redis commands per ${item} | most run inside, per ${item} |`,
    '|---|---:|---:|---|',
    ...rows
      .filter((r) => r.commands >= 0.05)
      .map((r) => `| ${r.source} | ${r.calls} | ${r.commands} | ${r.inside} |`),
    `| **total** | | **${total.toFixed(1)}** | |`,
  ].join('\n');
}
