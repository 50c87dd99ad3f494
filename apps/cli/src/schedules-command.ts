/**
 * `tetraloop schedules …`: a person makes, lists, pauses, resumes, deletes and triggers the
 * tenant's schedules through the API at `TETRALOOP_API_URL` (`/v1/schedules`), as `runs` reads
 * runs. `--json` prints the API's answer instead of the table or the message. Exit codes: 0 done,
 * 1 the API said no (an unknown schedule, a refused run request, a missing scope, unreachable),
 * 2 a usage error.
 */
import { parseArgs } from 'node:util';
import { TetraloopApiError, unwrap, type ScheduleView, type TetraloopClient } from '@tetraloop/client';
import { OVERLAP_POLICIES, CATCH_UP_POLICIES } from '@tetraloop/core/schedules';
import { clientOf, describeFailure, processClientIo, type ClientIo } from './api-client.js';
import { CommandError, UsageError, exitCodeOf, otherSubcommand, parsing } from './cli-args.js';
import { scheduleBodyOf } from './schedule-body.js';
import { cadenceText, schedulesTable } from './schedules-text.js';
import { shortTime } from './text-table.js';

export const SCHEDULES_USAGE = `usage: tetraloop schedules <command>

  list [--json]                         the tenant's schedules: cadence, paused, next firing, the
                                        last firing's outcome and the firings counted by outcome
  create --name <name> (--cron <pattern> [--timezone <zone>] | --every <ms|90s|15m|1h|1d>)
         (--request <file.json> | --task <text>) [--agent <agentId>]
         [--overlap ${OVERLAP_POLICIES.join('|')}] [--catch-up ${CATCH_UP_POLICIES.join('|')}] [--paused] [--json]
                                        make a schedule; prints its id
  pause <scheduleId> [--json]           stop its firings (trigger still runs it)
  resume <scheduleId> [--json]          fire again on its cadence
  delete <scheduleId>                   delete it; its runs stay
  trigger <scheduleId> [--json]         start its run now, whatever its cadence or pause; prints
                                        the run id

--request is a run request as POST /v1/runs takes it (a graph or a task, agentId, input, budget,
tags); --task <text> is {"task": …}; --agent sets the request's agent. A cron pattern has five
fields (minute first) or six (seconds first), read in --timezone (IANA, default UTC).
The API is TETRALOOP_API_URL (default http://localhost:3000); TETRALOOP_API_KEY, when set, is sent
as its bearer key (schedules:read to list, schedules:write for the rest).`;

const SCHEDULE_ID = /^[A-Za-z0-9_-]{1,64}$/;

export type SchedulesIo = ClientIo;

const processIo = processClientIo;

/** Runs `tetraloop schedules <args>`; answers the exit code. */
export async function schedulesCommand(
  args: readonly string[],
  io: SchedulesIo = processIo(),
): Promise<number> {
  return exitCodeOf(
    io.stderr,
    async () => {
      const [command, ...rest] = args;
      switch (command) {
        case 'list':
          return await list(rest, io);
        case 'create':
          return await create(rest, io);
        case 'pause':
        case 'resume':
          return await setPaused(command, rest, io);
        case 'delete':
          return await remove(rest, io);
        case 'trigger':
          return await trigger(rest, io);
        default:
          return otherSubcommand(command, { command: 'schedules', usage: SCHEDULES_USAGE }, io.stdout);
      }
    },
    (err) => describeFailure(err, 'TETRALOOP_API_KEY'),
  );
}

const JSON_FLAG = { json: { type: 'boolean', default: false } } as const;

async function list(args: readonly string[], io: SchedulesIo): Promise<number> {
  const { values, positionals } = parsing('schedules list', () =>
    parseArgs({ args: [...args], options: JSON_FLAG, allowPositionals: true, strict: true }),
  );
  if (positionals.length > 0)
    throw new UsageError(`schedules list takes no arguments, got '${positionals[0]}'`);
  const client = clientOf(io.target);
  const answer = unwrap(await client.api.GET('/v1/schedules'));
  if (values.json) {
    io.stdout(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  }
  const n = answer.schedules.length;
  if (n === 0) {
    io.stderr('no schedules\n');
    return 0;
  }
  io.stdout(schedulesTable(answer.schedules));
  io.stderr(`${n} schedule${n === 1 ? '' : 's'}\n`);
  return 0;
}

async function create(args: readonly string[], io: SchedulesIo): Promise<number> {
  const { values, positionals } = parsing('schedules create', () =>
    parseArgs({
      args: [...args],
      options: {
        name: { type: 'string' },
        cron: { type: 'string' },
        timezone: { type: 'string' },
        every: { type: 'string' },
        overlap: { type: 'string' },
        'catch-up': { type: 'string' },
        paused: { type: 'boolean', default: false },
        request: { type: 'string' },
        task: { type: 'string' },
        agent: { type: 'string' },
        ...JSON_FLAG,
      },
      allowPositionals: true,
      strict: true,
    }),
  );
  if (positionals.length > 0)
    throw new UsageError(`schedules create takes no arguments, got '${positionals[0]}'`);
  const body = await scheduleBodyOf(values);
  const client = clientOf(io.target);
  const made = unwrap(await client.api.POST('/v1/schedules', { body }));
  if (values.json) io.stdout(`${JSON.stringify(made, null, 2)}\n`);
  else io.stdout(`${made.id}\n`);
  io.stderr(`schedule ${made.id} made: ${describe(made)}\n`);
  return 0;
}

async function setPaused(
  command: 'pause' | 'resume',
  args: readonly string[],
  io: SchedulesIo,
): Promise<number> {
  const { id, json } = idArg(command, args);
  const changed = await onSchedule(id, io, async (client) =>
    unwrap(
      await client.api.PATCH('/v1/schedules/{id}', {
        params: { path: { id } },
        body: { paused: command === 'pause' },
      }),
    ),
  );
  if (json) io.stdout(`${JSON.stringify(changed, null, 2)}\n`);
  io.stderr(`schedule ${id} ${command === 'pause' ? 'paused' : 'resumed'}: ${describe(changed)}\n`);
  return 0;
}

async function remove(args: readonly string[], io: SchedulesIo): Promise<number> {
  const { id } = idArg('delete', args, false);
  await onSchedule(id, io, async (client) =>
    unwrap(await client.api.DELETE('/v1/schedules/{id}', { params: { path: { id } } })),
  );
  io.stderr(`schedule ${id} deleted (its runs stay)\n`);
  return 0;
}

async function trigger(args: readonly string[], io: SchedulesIo): Promise<number> {
  const { id, json } = idArg('trigger', args);
  const accepted = await onSchedule(id, io, async (client) =>
    unwrap(await client.api.POST('/v1/schedules/{id}/trigger', { params: { path: { id } } })),
  );
  if (json) io.stdout(`${JSON.stringify(accepted, null, 2)}\n`);
  else io.stdout(`${accepted.runId}\n`);
  io.stderr(
    `run ${accepted.runId} ${accepted.status} from schedule ${id} (tetraloop runs show ${accepted.runId})\n`,
  );
  return 0;
}

/** A schedule in a line: its cadence, whether it is paused, and when it fires next. */
function describe(s: ScheduleView): string {
  const when = s.paused ? 'paused' : `next firing ${shortTime(s.nextFireAt)}`;
  return `${s.name}, ${cadenceText(s)}, ${when}`;
}

function idArg(command: string, args: readonly string[], takesJson = true): { id: string; json: boolean } {
  const { values, positionals } = parsing(`schedules ${command}`, () =>
    parseArgs({
      args: [...args],
      options: takesJson ? JSON_FLAG : {},
      allowPositionals: true,
      strict: true,
    }),
  );
  const [id, ...extra] = positionals;
  if (id === undefined) {
    throw new UsageError(
      `schedules ${command} needs a schedule id: tetraloop schedules ${command} <scheduleId>`,
    );
  }
  if (extra.length > 0)
    throw new UsageError(`schedules ${command} takes one schedule id, got ${positionals.length}`);
  if (!SCHEDULE_ID.test(id)) {
    throw new UsageError(
      `schedules ${command}: '${id}' is not a schedule id (as schedules list shows: sch_…)`,
    );
  }
  return { id, json: (values as { json?: boolean }).json ?? false };
}

/** A call about one schedule; a 404 says it is not there (or not the caller's tenant's). */
async function onSchedule<T>(
  id: string,
  io: SchedulesIo,
  call: (client: TetraloopClient) => Promise<T>,
): Promise<T> {
  try {
    return await call(clientOf(io.target));
  } catch (err) {
    if (err instanceof TetraloopApiError && err.status === 404) {
      throw new CommandError(`no schedule ${id} (it may be another tenant's; tetraloop schedules list)`);
    }
    throw err;
  }
}
