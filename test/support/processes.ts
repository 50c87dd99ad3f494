/** Spawns the real `tetraloop` command as a child process and waits for it to say it is ready. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../apps/cli/bin/tetraloop.mjs', import.meta.url));
/**
 * Node's arguments that start the command on its TypeScript sources, as the bin does under the
 * `tetraloop-source` condition: a test runs the code as it is, whether a build exists or not
 * (test/e2e/built-packages.e2e.test.ts runs the built JavaScript).
 */
export const TETRALOOP = ['--conditions=tetraloop-source', BIN];

export interface Spawned {
  readonly child: ChildProcess;
  /** Everything the process wrote to stderr so far. */
  stderr(): string;
  /** Resolves with the exit code (or signal) once the process ends. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export function spawnTetraloop(
  args: string[],
  env: Record<string, string>,
  options: {
    cwd?: string;
    /** Node's arguments before `args`. @defaultValue TETRALOOP */ command?: readonly string[];
  } = {},
): Spawned {
  const child = spawn(process.execPath, [...(options.command ?? TETRALOOP), ...args], {
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  child.stdout?.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stderr: () => err,
    exited,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** Resolves when the process's stderr matches `pattern`; rejects if it exits first. */
export function stderrMatches(p: Spawned, pattern: RegExp): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const m = pattern.exec(p.stderr());
      if (m) {
        p.child.stderr?.off('data', check);
        resolve(m);
      }
    };
    p.child.stderr?.on('data', check);
    void p.exited.then(() => reject(new Error(`process exited before printing ${pattern}:\n${p.stderr()}`)));
    check();
  });
}

/** A tool worker process and the wait for it to say it is ready. */
export interface ToolWorker extends Spawned {
  /** Resolves once the worker says it is ready; rejects if it exits first. */
  readonly ready: Promise<unknown>;
}

/**
 * Spawns `tetraloop worker --pool tool --tools <module> --queues <queues>`: the worker process the
 * custom-tool suites serve their tool modules on (kept by the caller before it waits, so its hook can kill it).
 */
export function spawnToolWorker(module: string, queues: string, env: Record<string, string>): ToolWorker {
  const worker = spawnTetraloop(['worker', '--pool', 'tool', '--tools', module, '--queues', queues], env);
  return { ...worker, ready: stderrMatches(worker, /worker ready: pools tool/) };
}

/** Runs the `tetraloop` command to its end; answers its exit code and everything it wrote. */
export function runTetraloop(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...TETRALOOP, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    // 'close', not 'exit': the output streams are drained by then.
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
