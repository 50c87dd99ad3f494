/**
 * `tetraloop schedules …` against a running stack whose sense pool fires schedules: the real
 * command as a child process for create, list, pause, resume, trigger and delete, and the
 * command's function in-process for its usage errors. Exit codes: 0 done, 1 the API said no (an
 * unknown schedule, a run request it refuses), 2 usage errors.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QueueEvents } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulesCommand } from '@tetraloop/cli';
import type { ScheduleView } from '@tetraloop/client';
import { QUEUE_NAMES } from '@tetraloop/core/queues';
import { connectRedis } from '@tetraloop/core/runtime';
import { nextFiring } from '@tetraloop/core/schedules';
import { runTetraloop } from '../support/processes.js';
import { startStack, waitFor, type Stack } from '../support/stack.js';

let stack: Stack;
let senseEvents: QueueEvents;
let dir: string;
let requestFile: string;
let badRequestFile: string;
const tag = `sched-cli-${Date.now()}`;
/** 07:00 on 1 January in Paris: a cadence that does not fire while the tests run. */
const NEW_YEAR = { cron: '0 7 1 1 *', timezone: 'Europe/Paris' };

beforeAll(async () => {
  stack = await startStack({ pools: ['sense', 'plan', 'tool'] });
  senseEvents = new QueueEvents(QUEUE_NAMES.sense, {
    connection: connectRedis(stack.env.REDIS_URL!, 'worker', 'schedules-command-events'),
    prefix: stack.prefix,
  });
  senseEvents.on('completed', ({ jobId }) => {
    handled.push(jobId);
    for (const check of [...onHandled]) check();
  });
  await senseEvents.waitUntilReady();
  dir = await mkdtemp(join(tmpdir(), 'tetraloop-schedules-'));
  requestFile = join(dir, 'request.json');
  badRequestFile = join(dir, 'bad.json');
  await writeFile(
    requestFile,
    JSON.stringify({
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
      tags: [tag],
    }),
  );
  await writeFile(
    badRequestFile,
    JSON.stringify({ graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope', args: {} }] } }),
  );
}, 60_000);

afterAll(async () => {
  await senseEvents?.close();
  await stack?.close();
  await rm(dir, { recursive: true, force: true });
});

const env = (): Record<string, string> => ({ TETRALOOP_API_URL: stack.url, LOG_LEVEL: 'silent' });
const schedules = (...args: string[]) => runTetraloop(['schedules', ...args], env());

async function view(id: string): Promise<ScheduleView> {
  const res = await fetch(`${stack.url}/v1/schedules/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as ScheduleView;
}

/** The command's function in-process: what it printed and the exit code it answered. */
async function inProcess(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await schedulesCommand(args, {
    target: { url: stack.url },
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
  });
  return { code, stdout, stderr };
}

/**
 * The table's line for a schedule, split into its cells (two or more spaces apart): from the real
 * command when `real`, else in-process (a child process costs seconds on a loaded machine).
 */
async function listed(id: string, real = false): Promise<string[]> {
  const ran = real ? await schedules('list') : await inProcess('list');
  expect(ran.code, ran.stderr).toBe(0);
  const [header, ...rows] = ran.stdout.trimEnd().split('\n');
  expect(header).toMatch(/^ID +NAME +CADENCE +PAUSED +NEXT FIRE +LAST OUTCOME +LAST RUN +FIRINGS$/);
  const row = rows.find((r) => r.startsWith(`${id} `));
  expect(row, ran.stdout).toBeDefined();
  return row!.split(/ {2,}/);
}

/** The sense jobs handled so far: a firing may be handled before the command that made it exits. */
const handled: string[] = [];
const onHandled = new Set<() => void>();

/** Resolves when a firing of schedule `id` has been handled by a sense worker. */
function fired(id: string): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (!handled.some((jobId) => jobId.includes(`:${id}:`))) return;
      onHandled.delete(check);
      resolve();
    };
    onHandled.add(check);
    check();
  });
}

describe('tetraloop schedules', () => {
  it('creates a paused cron schedule from a request file, lists it, resumes, pauses and deletes it', async () => {
    const made = await schedules(
      'create',
      '--name',
      'new year report',
      '--cron',
      NEW_YEAR.cron,
      '--timezone',
      NEW_YEAR.timezone,
      '--request',
      requestFile,
      '--overlap',
      'allow',
      '--catch-up',
      'latest',
      '--paused',
    );
    expect(made.code, made.stderr).toBe(0);
    const id = made.stdout.trim();
    expect(id).toMatch(/^sch_[0-9a-f]{20}$/);
    expect(made.stderr).toContain(
      `schedule ${id} made: new year report, cron 0 7 1 1 * Europe/Paris, paused`,
    );
    expect(await view(id)).toMatchObject({
      name: 'new year report',
      ...NEW_YEAR,
      everyMs: null,
      overlap: 'allow',
      catchUp: 'latest',
      paused: true,
      nextFireAt: null,
      request: { tags: [tag] },
    });
    expect(await listed(id, true)).toEqual([
      id,
      'new year report',
      'cron 0 7 1 1 * Europe/Paris',
      'yes',
      '-',
      '-',
      '-',
      '-',
    ]);

    const resumed = await schedules('resume', id);
    expect(resumed.code, resumed.stderr).toBe(0);
    // The next 1 January, 07:00 in Paris, as BullMQ's cron parser computes it.
    const next = new Date(nextFiring(NEW_YEAR, Date.now())!).toISOString().replace(/\.\d+Z$/, 'Z');
    expect(resumed.stderr).toContain(
      `schedule ${id} resumed: new year report, cron 0 7 1 1 * Europe/Paris, next firing ${next}`,
    );
    expect((await listed(id)).slice(3, 5)).toEqual(['no', next]);

    const paused = await schedules('pause', id, '--json');
    expect(paused.code, paused.stderr).toBe(0);
    expect(JSON.parse(paused.stdout)).toMatchObject({ id, paused: true, nextFireAt: null });

    const deleted = await schedules('delete', id);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stderr).toContain(`schedule ${id} deleted`);
    expect((await fetch(`${stack.url}/v1/schedules/${id}`)).status).toBe(404);
    const again = await inProcess('delete', id);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no schedule ${id}`);
  }, 120_000);

  it('triggers a paused schedule: the run carries the schedule, is its last run and is listed by it', async () => {
    const made = await schedules(
      'create',
      '--name',
      'on demand',
      '--every',
      '1h',
      '--request',
      requestFile,
      '--paused',
    );
    expect(made.code, made.stderr).toBe(0);
    const id = made.stdout.trim();
    const triggered = await schedules('trigger', id);
    expect(triggered.code, triggered.stderr).toBe(0);
    const runId = triggered.stdout.trim();
    expect(triggered.stderr).toContain(`run ${runId} queued from schedule ${id}`);
    expect(await waitFor(stack.url, runId)).toMatchObject({
      status: 'succeeded',
      scheduleId: id,
      tags: [tag],
    });
    // A trigger is not a firing: the run is the last run, and no firing is counted.
    expect(await listed(id)).toEqual([id, 'on demand', 'every 1h', 'yes', '-', '-', runId, '-']);
    const runs = await runTetraloop(['runs', 'list', '--schedule', id], env());
    expect(runs.code, runs.stderr).toBe(0);
    const rows = runs.stdout.trimEnd().split('\n').slice(1);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(new RegExp(`^${runId} +succeeded `));
  }, 120_000);

  it('lists a firing: its outcome, its run and the count', async () => {
    const made = await schedules(
      'create',
      '--name',
      'hourly',
      '--every',
      '3600000',
      '--request',
      requestFile,
    );
    expect(made.code, made.stderr).toBe(0);
    const id = made.stdout.trim();
    // An interval's first firing is at once (the next an hour later).
    await fired(id);
    const state = (await view(id)).state;
    expect(state).toMatchObject({ lastOutcome: 'started', firings: { started: 1 } });
    expect(await waitFor(stack.url, state.lastRunId!)).toMatchObject({ status: 'succeeded', scheduleId: id });
    const row = await listed(id);
    expect([row[0], row[2], row[3], ...row.slice(5)]).toEqual([
      id,
      'every 1h',
      'no',
      'started',
      state.lastRunId,
      'started 1',
    ]);
    const json = await inProcess('list', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({
      schedules: expect.arrayContaining([expect.objectContaining({ id, state })]),
    });
    expect((await inProcess('delete', id)).code).toBe(0);
  }, 120_000);

  it('exits 1 when the API refuses the run request, naming where', async () => {
    const refused = await schedules('create', '--name', 'bad', '--every', '1h', '--request', badRequestFile);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^ {2}request\.graph\S*: .*nope/m);
    const unknown = await schedules('trigger', 'sch_00000000000000000000');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no schedule sch_00000000000000000000');
  }, 120_000);

  it('exits 2 on bad usage, naming the flag', async () => {
    const file = requestFile;
    const cases: [string[], RegExp][] = [
      [[], /^usage: tetraloop schedules <command>/],
      [['frob'], /unknown schedules command 'frob'/],
      [['create', '--every', '1h', '--request', file], /needs --name/],
      [['create', '--name', 'x', '--request', file], /needs when to fire: --cron .* or --every/],
      [
        ['create', '--name', 'x', '--cron', '* * * * *', '--every', '1h', '--request', file],
        /needs when to fire/,
      ],
      [['create', '--name', 'x', '--every', 'soon', '--request', file], /--every takes milliseconds/],
      [['create', '--name', 'x', '--every', '10', '--request', file], /--every: .*1000/],
      [['create', '--name', 'x', '--cron', 'every day', '--request', file], /--cron: not a cron pattern/],
      [
        ['create', '--name', 'x', '--cron', '0 7 * * *', '--timezone', 'Mars/Base', '--request', file],
        /--timezone: not an IANA time zone/,
      ],
      [['create', '--name', 'x', '--every', '1h', '--overlap', 'queue', '--request', file], /--overlap: /],
      [['create', '--name', 'x', '--every', '1h'], /--request <file.json> or --task <text>/],
      [
        ['create', '--name', 'x', '--every', '1h', '--task', 't', '--request', file],
        /--request <file.json> or --task/,
      ],
      [
        ['create', '--name', 'x', '--every', '1h', '--request', join(dir, 'missing.json')],
        /--request .*missing\.json: ENOENT/,
      ],
      [['pause'], /schedules pause needs a schedule id/],
      [['trigger', 'a/b'], /'a\/b' is not a schedule id/],
      [['delete', 'x', '--json'], /schedules delete: Unknown option '--json'/],
    ];
    for (const [args, message] of cases) {
      const { code, stderr } = await inProcess(...args);
      expect(code, args.join(' ')).toBe(2);
      expect(stderr, args.join(' ')).toMatch(message);
    }
    const real = await schedules('create', '--name', 'x', '--every', 'soon', '--request', file);
    expect(real.code).toBe(2);
    expect(real.stderr).toMatch(/--every takes milliseconds/);
  }, 120_000);
});
