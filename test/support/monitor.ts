/**
 * Redis's MONITOR for tests and benchmarks, over a socket of its own: every command Redis runs, in
 * the order it runs them, with the client (an address, or `lua` for a script's own commands).
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { Redis } from 'ioredis';

/**
 * One MONITOR line's arguments, unescaped as Redis escapes them (`sdscatrepr`: `\\`, `\"`, `\n`,
 * `\r`, `\t`, `\a`, `\b`, other bytes as `\xHH`), so an EVAL's script text hashes as sent.
 */
export function monitorArgs(line: string): { source: string; args: string[] } | undefined {
  const open = line.indexOf('[');
  const close = line.indexOf(']', open);
  if (open < 0 || close < 0) return undefined;
  // `[<db> <client address or "lua">]`
  const source = line.slice(open + 1, close).split(' ')[1] ?? '';
  const args: string[] = [];
  const escapes: Record<string, number> = { n: 10, r: 13, t: 9, a: 7, b: 8, '"': 34, '\\': 92 };
  for (let i = close + 1; i < line.length; i++) {
    if (line[i] !== '"') continue;
    const bytes: number[] = [];
    for (i++; i < line.length && line[i] !== '"'; i++) {
      const c = line[i]!;
      if (c !== '\\') {
        bytes.push(...Buffer.from(c));
      } else if (line[i + 1] === 'x') {
        bytes.push(parseInt(line.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        bytes.push(escapes[line[i + 1]!] ?? line.charCodeAt(i + 1));
        i += 1;
      }
    }
    args.push(Buffer.from(bytes).toString('utf8'));
  }
  return { source, args };
}

/**
 * Streams MONITOR's lines to `onLine` over a socket of its own. Not ioredis's `monitor()`: it
 * enters monitoring mode a tick after MONITOR's answer, and a busy Redis's first lines, arriving in
 * the same read as that answer, then break its command queue.
 */
export async function monitorLines(redisUrl: string, onLine: (line: string) => void): Promise<() => void> {
  const url = new URL(redisUrl);
  const socket = connect(Number(url.port || 6379), url.hostname);
  await once(socket, 'connect');
  const auth = url.password
    ? `AUTH ${url.username ? `${decodeURIComponent(url.username)} ` : ''}${decodeURIComponent(url.password)}\r\n`
    : '';
  socket.write(`${auth}MONITOR\r\n`);
  let buffered = '';
  let ready: () => void;
  const monitoring = new Promise<void>((resolve) => (ready = resolve));
  let answers = auth ? 2 : 1;
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf('\r\n')) >= 0) {
      // Bytes as they came (latin1), read as UTF-8 once the line is whole.
      const line = Buffer.from(buffered.slice(0, end), 'latin1').toString('utf8');
      buffered = buffered.slice(end + 2);
      if (line.startsWith('-')) throw new Error(`MONITOR refused: ${line.slice(1)}`);
      if (answers > 0) {
        answers -= 1;
        if (answers === 0) ready();
        continue;
      }
      onLine(line.slice(1));
    }
  });
  await monitoring;
  return () => socket.destroy();
}

/**
 * Calls `onCommand` with each command Redis runs from now until the answered function is called:
 * its words, unescaped, and what sent it (a client's address, or `lua`).
 */
export async function watchCommands(
  redisUrl: string,
  onCommand: (args: string[], source: string) => void,
): Promise<() => void> {
  return monitorLines(redisUrl, (line) => {
    const parsed = monitorArgs(line);
    if (parsed) onCommand(parsed.args, parsed.source);
  });
}

/**
 * Runs `act` under MONITOR, passing `onLine` every line Redis gave until `act` was done, and
 * answers what `act` answered or threw. MONITOR lists commands in the order Redis ran them, so a
 * marker command sent once `act` is done marks the end: every command `act` caused comes before
 * it, however late its line is read.
 */
export async function monitorWhile<T>(
  redisUrl: string,
  onLine: (line: string) => void,
  act: () => Promise<T>,
): Promise<T | Error> {
  const mark = `tetraloop-monitor-end:${randomUUID()}`;
  let ended!: () => void;
  const end = new Promise<void>((resolve) => (ended = resolve));
  const stop = await monitorLines(redisUrl, (line) => {
    if (line.includes(mark)) ended();
    else onLine(line);
  });
  const marker = new Redis(redisUrl, { lazyConnect: true });
  try {
    let out: T | Error;
    try {
      out = await act();
    } catch (err) {
      out = err instanceof Error ? err : new Error(String(err));
    }
    await marker.exists(mark);
    await end;
    return out;
  } finally {
    marker.disconnect();
    stop();
  }
}

/** A command MONITOR showed: its words, and what sent it (a client's address, or `lua`). */
export interface MonitoredCommand {
  readonly args: string[];
  readonly source: string;
}

/**
 * The commands Redis ran while `act` ran, each as its words and what sent it (a client's address,
 * or `lua`), and what `act` answered or threw.
 */
export async function commandsWhile<T>(
  redisUrl: string,
  act: () => Promise<T>,
): Promise<{ commands: MonitoredCommand[]; out: T | Error }> {
  const commands: MonitoredCommand[] = [];
  const out = await monitorWhile(
    redisUrl,
    (line) => {
      const parsed = monitorArgs(line);
      if (parsed) commands.push(parsed);
    },
    act,
  );
  return { commands, out };
}
