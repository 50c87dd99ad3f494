/**
 * A stand-in `docker` executable for testing `tetraloop dev`'s Docker fallback on a machine with no
 * Docker engine (this one has the client but no daemon).
 *
 * Why a stand-in, and why it is honest: what the dev command does with Docker is spawn the
 * `docker` CLI with a handful of subcommands (`version`, `rm --force`, `run`, `port`, `stop`) and
 * then talk Redis to the published port. The stand-in implements exactly those subcommands, and
 * `run` starts a REAL `redis-server` (the one the suite uses elsewhere) with the same Redis
 * arguments the container would get, its `/data` mount mapped to the host directory, listening on
 * a free loopback port that `port` reports. So everything after the CLI call — the connection, AOF
 * in the mounted data directory, persistence across a restart, the container's name being reused,
 * the stop on shutdown — runs against a real Redis. What it cannot show is the real engine's
 * behaviour (pulling the image, user mapping of the mount); every call is logged with its full
 * argument list so the test checks that what would reach the engine is right.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface DockerStandIn {
  /** A directory holding only the `docker` executable: put it on PATH. */
  readonly binDir: string;
  /** Every call so far, as its argument list. */
  calls(): string[][];
  /** Containers running now, by name: the pid of their redis-server and its port. */
  running(): Record<string, { pid: number; port: number }>;
}

const SCRIPT = String.raw`
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const [STATE, REDIS_SERVER] = [__STATE__, __REDIS_SERVER__];
const args = process.argv.slice(2);
fs.appendFileSync(path.join(STATE, 'calls.jsonl'), JSON.stringify(args) + '\n');
const file = (name) => path.join(STATE, name + '.json');
const read = (name) => { try { return JSON.parse(fs.readFileSync(file(name), 'utf8')); } catch { return null; } };
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
const fail = (message) => { process.stderr.write('Error response from daemon: ' + message + '\n'); process.exit(1); };
async function gone(pid) { while (alive(pid)) await new Promise((r) => setTimeout(r, 20)); }
async function freePort() {
  return new Promise((resolve) => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); }); });
}
// The options of docker run the dev command uses, each with its value (null: a flag alone).
const RUN_OPTIONS = { '--detach': false, '--rm': false, '--name': true, '--label': true, '--user': true, '--publish': true, '--volume': true };
async function main() {
  const [command, ...rest] = args;
  switch (command) {
    case 'version':
      process.stdout.write('27.0.0-stand-in\n');
      return;
    case 'rm': {
      const name = rest.filter((a) => !a.startsWith('-'))[0];
      const c = read(name);
      if (c) { if (alive(c.pid)) { process.kill(c.pid, 'SIGKILL'); await gone(c.pid); } fs.unlinkSync(file(name)); }
      else if (!rest.includes('--force')) fail('No such container: ' + name);
      process.stdout.write(name + '\n');
      return;
    }
    case 'run': {
      const opts = {};
      let i = 0;
      for (; i < rest.length && rest[i].startsWith('-'); i++) {
        const takes = RUN_OPTIONS[rest[i]];
        if (takes === undefined) fail('stand-in: unknown run option ' + rest[i]);
        opts[rest[i]] = takes ? rest[++i] : true;
      }
      const [image, cmd, ...redisArgs] = rest.slice(i);
      if (cmd !== 'redis-server') fail('stand-in: runs redis-server only, not ' + cmd);
      const name = opts['--name'];
      if (read(name)) fail('Conflict. The container name "/' + name + '" is already in use');
      if (opts['--publish'] !== '127.0.0.1::6379') fail('stand-in: expects --publish 127.0.0.1::6379');
      const [host, inside] = (opts['--volume'] || '').split(':');
      // The container sees the host directory at its mount point.
      const mapped = redisArgs.map((a) => (inside && a === inside ? host : a));
      const port = await freePort();
      const child = spawn(REDIS_SERVER, [...mapped, '--port', String(port), '--bind', '127.0.0.1'], { detached: true, stdio: 'ignore' });
      child.unref();
      fs.writeFileSync(file(name), JSON.stringify({ pid: child.pid, port, image, rm: !!opts['--rm'] }));
      process.stdout.write('c0ffee' + child.pid + '\n');
      return;
    }
    case 'port': {
      const c = read(rest[0]);
      if (!c) fail('No such container: ' + rest[0]);
      if (rest[1] !== '6379/tcp') fail('stand-in: no mapping for ' + rest[1]);
      process.stdout.write('127.0.0.1:' + c.port + '\n');
      return;
    }
    case 'stop': {
      const name = rest.filter((a, j) => !a.startsWith('-') && rest[j - 1] !== '--time')[0];
      const c = read(name);
      if (!c) fail('No such container: ' + name);
      if (alive(c.pid)) { process.kill(c.pid, 'SIGTERM'); await gone(c.pid); }
      if (c.rm) fs.unlinkSync(file(name));
      process.stdout.write(name + '\n');
      return;
    }
    default:
      fail('stand-in: unsupported command ' + command);
  }
}
main().catch((err) => fail(String(err)));
`;

/** Writes the stand-in into a fresh directory; its state (containers, call log) lives beside it. */
export function dockerStandIn(): DockerStandIn {
  const root = mkdtempSync(join(tmpdir(), 'tetraloop-docker-'));
  const binDir = join(root, 'bin');
  const state = join(root, 'state');
  mkdirSync(binDir);
  mkdirSync(state);
  const redisServer = execFileSync('sh', ['-c', 'command -v redis-server']).toString().trim();
  const source = SCRIPT.replace('__STATE__', JSON.stringify(state)).replace(
    '__REDIS_SERVER__',
    JSON.stringify(redisServer),
  );
  const docker = join(binDir, 'docker');
  writeFileSync(docker, `#!${process.execPath}\n${source}`);
  chmodSync(docker, 0o755);
  writeFileSync(join(state, 'calls.jsonl'), '');
  return {
    binDir,
    calls: () =>
      readFileSync(join(state, 'calls.jsonl'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as string[]),
    running() {
      const out: Record<string, { pid: number; port: number }> = {};
      for (const call of this.calls()) {
        const name = call[0] === 'run' ? call[call.indexOf('--name') + 1] : undefined;
        if (!name) continue;
        try {
          const c = JSON.parse(readFileSync(join(state, `${name}.json`), 'utf8')) as {
            pid: number;
            port: number;
          };
          out[name] = { pid: c.pid, port: c.port };
        } catch {
          // Not running.
        }
      }
      return out;
    },
  };
}
