/**
 * CPU time spent by processes during a measured span, read from /proc (Linux): the profile
 * behind a throughput figure, split by process. Elsewhere the readings are null.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** User + system CPU milliseconds of `pid` so far, or null when /proc cannot tell. */
export function cpuMsOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at state, field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/**
 * Write system calls `pid` made so far (`syscw` of /proc/<pid>/io: each socket write, and each
 * write to a file such as a log or Redis's AOF), or null when /proc cannot tell. It moves far less
 * than CPU time with the machine's load, but not nothing: how many commands share one write
 * depends on how much work overlaps.
 */
export function writeCallsOf(pid: number): number | null {
  try {
    const match = /^syscw:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/**
 * Measures the CPU milliseconds and the write system calls each named group of processes spends
 * while `work` runs.
 */
export async function cpuDuring<T>(
  groups: Record<string, readonly number[]>,
  work: () => Promise<T>,
): Promise<{ result: T; cpuMs: Record<string, number | null>; writeCalls: Record<string, number | null> }> {
  const sum = (values: (number | null)[]): number | null =>
    values.some((v) => v === null) ? null : values.reduce((a, b) => a! + b!, 0);
  const read = (of: (pid: number) => number | null): Record<string, number | null> =>
    Object.fromEntries(Object.entries(groups).map(([name, pids]) => [name, sum(pids.map(of))]));
  const before = { cpu: read(cpuMsOf), writes: read(writeCallsOf) };
  const result = await work();
  const after = { cpu: read(cpuMsOf), writes: read(writeCallsOf) };
  const delta = (a: Record<string, number | null>, b: Record<string, number | null>) =>
    Object.fromEntries(
      Object.keys(groups).map((name) => {
        const x = a[name];
        const y = b[name];
        return [name, x == null || y == null ? null : x - y];
      }),
    );
  return { result, cpuMs: delta(after.cpu, before.cpu), writeCalls: delta(after.writes, before.writes) };
}

/**
 * With BENCH_CPU_PROF=<dir>, records a V8 CPU profile of this process while `work` runs and
 * writes it to <dir>/<name>.cpuprofile (open it in Chrome DevTools or speedscope).
 */
export async function profiled<T>(name: string, work: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_CPU_PROF;
  if (!dir) return work();
  const { Session } = await import('node:inspector/promises');
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/${name}.cpuprofile`, JSON.stringify(profile));
    session.disconnect();
  }
}

/** Redis commands executed so far (INFO commandstats), in all and for scripts (EVALSHA/EVAL). */
export async function commandCounts(
  info: () => Promise<string>,
): Promise<{ commands: number; scripts: number; usec: number }> {
  let commands = 0;
  let scripts = 0;
  let usec = 0;
  for (const line of (await info()).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (!match) continue;
    commands += Number(match[2]);
    usec += Number(match[3]);
    if (match[1] === 'evalsha' || match[1] === 'eval') scripts += Number(match[2]);
  }
  return { commands, scripts, usec };
}
