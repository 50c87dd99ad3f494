/**
 * `tetraloop run --follow`, `tetraloop runs list|show` and `tetraloop explain` against a running
 * stack: the real command as a child process (stderr is no terminal there: a plain line per change),
 * and the commands' functions in-process for the terminal view and the tables. Exit codes: 0 done
 * (a run that succeeded), 1 a run that failed or an API that said no, 2 usage errors.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainCommand, runGraphFile, runsCommand, type RunsIo } from '@tetraloop/cli';
import type { RunDocument } from '@tetraloop/core/domain';
import { runTetraloop } from '../support/processes.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let dir: string;
let okFile: string;
let failFile: string;
const tag = `cli-${Date.now()}`;

const wait = (id: string, ms: number) => ({ id, kind: 'tool', tool: 'wait', args: { ms } });

beforeAll(async () => {
  stack = await startStack({ pools: ['plan', 'tool'] });
  dir = await mkdtemp(join(tmpdir(), 'tetraloop-runs-'));
  okFile = join(dir, 'ok.json');
  failFile = join(dir, 'fail.json');
  // a → (slow, fast) → join: the slow branch is the critical path.
  await writeFile(
    okFile,
    JSON.stringify({
      graph: {
        nodes: [wait('a', 20), wait('slow', 400), wait('fast', 50), wait('join', 20)],
        edges: [
          ['a', 'slow'],
          ['a', 'fast'],
          ['slow', 'join'],
          ['fast', 'join'],
        ],
      },
      tags: [tag],
    }),
  );
  await writeFile(
    failFile,
    JSON.stringify({
      graph: {
        nodes: [
          wait('first', 10),
          {
            id: 'down',
            kind: 'tool',
            tool: 'http',
            retry: { network: 0 },
            args: { url: 'http://127.0.0.1:9/' },
          },
        ],
        edges: [['first', 'down']],
      },
      tags: [tag],
    }),
  );
});

afterAll(async () => {
  await stack?.close();
  await rm(dir, { recursive: true, force: true });
});

const env = (): Record<string, string> => ({ TETRALOOP_API_URL: stack.url, LOG_LEVEL: 'silent' });

/** In-process: what a command printed and the exit code it answered. */
async function inProcess(
  command: (io: RunsIo) => Promise<number>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await command({
    target: { url: stack.url },
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
  });
  return { code, stdout, stderr };
}

describe('tetraloop run --follow', () => {
  let succeeded: RunDocument;

  it('prints a line per node change with its elapsed time, and exits 0 when the run succeeds', async () => {
    const ran = await runTetraloop(['run', okFile, '--follow'], env());
    expect(ran.code, ran.stderr).toBe(0);
    succeeded = JSON.parse(ran.stdout) as RunDocument;
    expect(succeeded.status).toBe('succeeded');
    const lines = ran.stderr.split('\n');
    expect(lines[0]).toBe(`run ${succeeded.runId} accepted`);
    for (const id of ['a', 'slow', 'fast', 'join']) {
      expect(lines, id).toContainEqual(expect.stringMatching(new RegExp(`^  ▶ ${id} +running( +\\d+ms)?$`)));
      expect(lines, id).toContainEqual(
        expect.stringMatching(new RegExp(`^  ✓ ${id} +succeeded +\\d+(ms|\\.\\ds)$`)),
      );
    }
    // The elapsed time shown is at least the node's own wait (a loaded machine only adds to it).
    const slow = /✓ slow +succeeded +(?:(\d+)ms|(\d+\.\d)s)$/.exec(lines.find((l) => /✓ slow/.test(l))!)!;
    expect(slow[1] !== undefined ? Number(slow[1]) : Number(slow[2]) * 1000).toBeGreaterThanOrEqual(400);
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^run ${succeeded.runId}  succeeded  \\d`)),
    );
    // Each change once: no line repeats.
    const nodeLines = lines.filter((l) => l.startsWith('  '));
    expect(new Set(nodeLines).size).toBe(nodeLines.length);
  });

  it('exits 1 when the run fails, having shown the failed node', async () => {
    const ran = await runTetraloop(['run', failFile, '--follow'], env());
    expect(ran.code).toBe(1);
    expect(JSON.parse(ran.stdout)).toMatchObject({ status: 'failed' });
    expect(ran.stderr).toMatch(/^ {2}✗ down +failed/m);
    expect(ran.stderr).toMatch(/^run \S+ {2}failed/m);
  });

  it('redraws the view in place on a terminal', async () => {
    let stderr = '';
    let stdout = '';
    const code = await runGraphFile(okFile, {
      follow: true,
      target: { url: stack.url },
      io: { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), tty: true, rows: 30 },
    });
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ status: 'succeeded' });
    // Lines are cleared and rewritten, the cursor moved back up over the last drawing.
    expect(stderr).toContain('\x1b[2K');
    expect(stderr).toContain('\x1b[5F');
    const last = stderr.slice(stderr.lastIndexOf('\x1b[5F'));
    expect(last).toMatch(/run \S+ {2}succeeded/);
    for (const id of ['a', 'slow', 'fast', 'join']) expect(last).toMatch(new RegExp(`✓ ${id} +succeeded`));
  });
});

describe('tetraloop runs', () => {
  it('lists runs as a table, filtered by status and time, as the real command', async () => {
    const listed = await runTetraloop(
      ['runs', 'list', '--tag', tag, '--status', 'failed', '--since', '1h'],
      env(),
    );
    expect(listed.code, listed.stderr).toBe(0);
    const [header, ...rows] = listed.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^RUN +STATUS +AGENT +CREATED +DURATION +NODES +TOKENS +TAGS +TASK$/);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(
      new RegExp(`^\\S{36} +failed +main +\\S+Z +\\S+ +1/2 \\(1 failed\\) +0 +${tag} +-$`),
    );
    const all = await inProcess((io) => runsCommand(['list', '--tag', tag], io));
    expect(
      all.stdout
        .trimEnd()
        .split('\n')
        .slice(1)
        .map((r) => r.split(/ +/)[1]),
    ).toEqual(['succeeded', 'failed', 'succeeded']);
    const paged = await inProcess((io) => runsCommand(['list', '--tag', tag, '--limit', '1'], io));
    expect(paged.stderr).toMatch(/^more: add --cursor \S+$/m);
    const json = await inProcess((io) => runsCommand(['list', '--tag', tag, '--json'], io));
    expect(JSON.parse(json.stdout)).toMatchObject({ runs: expect.any(Array), nextCursor: null });
  });

  it('shows one run and its nodes', async () => {
    const page = await inProcess((io) =>
      runsCommand(['list', '--tag', tag, '--status', 'failed', '--json'], io),
    );
    const runId = (JSON.parse(page.stdout) as { runs: { runId: string }[] }).runs[0]!.runId;
    const shown = await runTetraloop(['runs', 'show', runId], env());
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`run:      ${runId}`);
    expect(shown.stdout).toMatch(/^status: +failed$/m);
    expect(shown.stdout).toMatch(/^error: +node_failed: /m);
    expect(shown.stdout).toMatch(/^NODE +STATUS +ATTEMPTS +DURATION +ERROR$/m);
    expect(shown.stdout).toMatch(/^down +failed +1 +\S+ +network: /m);
  });

  it('explains a run as a table with the critical path marked', async () => {
    const page = await inProcess((io) =>
      runsCommand(['list', '--tag', tag, '--status', 'succeeded', '--json'], io),
    );
    const runId = (JSON.parse(page.stdout) as { runs: { runId: string }[] }).runs[0]!.runId;
    const explained = await runTetraloop(['explain', runId], env());
    expect(explained.code, explained.stderr).toBe(0);
    const out = explained.stdout;
    expect(out).toMatch(/^parallelism \d\.\d\d \(node time ÷ wall\)/m);
    expect(out).toMatch(/^ +NODE +STATUS +QUEUE +EXEC +RETRY +THROTTLED +PARKED +TOTAL +ATTEMPTS +TOKENS$/m);
    expect(out).toMatch(/^\* +slow +succeeded /m);
    expect(out).toMatch(/^ +fast +succeeded /m);
    expect(out).toMatch(/^critical path \(\*\): a \S+ → slow \S+ → join \S+$/m);
    const json = await inProcess((io) => explainCommand([runId, '--json'], io));
    expect(JSON.parse(json.stdout)).toMatchObject({
      runId,
      criticalPath: [{ id: 'a' }, { id: 'slow' }, { id: 'join' }],
    });
  });

  it('exits 1 for an unknown run and 2 on bad usage', async () => {
    const unknown = await inProcess((io) =>
      runsCommand(['show', '4c5403be-886b-4587-863f-2605f1e6eae1'], io),
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no run 4c5403be-886b-4587-863f-2605f1e6eae1');
    const cases: [string[], RegExp][] = [
      [['runs'], /^usage: tetraloop runs <command>/],
      [['runs', 'frob'], /unknown runs command 'frob'/],
      [['runs', 'show'], /runs show needs a run id/],
      [['runs', 'show', 'nope'], /'nope' is not a run id/],
      [['runs', 'list', '--limit', '0'], /--limit must be an integer from 1 to 200/],
      [['runs', 'list', '--since', 'yesterday'], /query\.since: must be/],
      [['runs', 'list', '--bogus'], /runs list: Unknown option '--bogus'/],
      [['explain'], /explain needs a run id/],
    ];
    for (const [[command, ...args], message] of cases) {
      const result = await inProcess((io) =>
        command === 'explain' ? explainCommand(args, io) : runsCommand(args, io),
      );
      expect(result.code, [command, ...args].join(' ')).toBe(2);
      expect(result.stderr, [command, ...args].join(' ')).toMatch(message);
    }
    // The real command too.
    const real = await runTetraloop(['runs', 'show', 'nope'], env());
    expect(real.code).toBe(2);
    expect(real.stderr).toMatch(/'nope' is not a run id/);
  });
});
