/**
 * `tetraloop lessons …`: an operator reads an agent's lessons and overrides their status through
 * the API at `TETRALOOP_API_URL`, as `tetraloop run` submits runs. Exit codes: 0 done, 1 the API
 * said no (an unknown lesson, the reflect loop off, the API unreachable), 2 a usage error.
 */
import { CommandError, UsageError, exitCodeOf, otherSubcommand, parsing } from './cli-args.js';
import { cut, textTable } from './text-table.js';
import { parseArgs } from 'node:util';
import { LESSON_STATUSES, type LessonStatus } from '@tetraloop/core/memory';
import {
  TetraloopApiError,
  unwrap,
  type AgentLessons,
  type Lesson,
  type TetraloopClient,
} from '@tetraloop/client';
import { apiTargetFromEnv, clientOf, describeFailure } from './api-client.js';

export const LESSONS_USAGE = `usage: tetraloop lessons <command>

  list <agentId> [--status ${LESSON_STATUSES.join('|')}] [--json]
                                        the agent's lessons, as a table (--json: the API's answer)
  show <lessonId>                       one lesson, as JSON
  retire <lessonId>                     retire a lesson: it stops taking effect
  pin <lessonId>                        pin a lesson: in effect, and reflection leaves it alone
  activate <lessonId>                   put a lesson in effect (reflection may still retire it)

A lesson id is <agentId>.<12 hex digits>. The API is TETRALOOP_API_URL (default http://localhost:3000);
TETRALOOP_API_KEY, when set, is sent as its bearer key (runs:read to read, lessons:write to override).`;

/** The status each override command sets (`PATCH /v1/lessons/:id`). */
const OVERRIDES = { retire: 'retired', pin: 'pinned', activate: 'active' } as const satisfies Record<
  string,
  LessonStatus
>;
type Override = keyof typeof OVERRIDES;

const AGENT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const LESSON_ID = /^([A-Za-z0-9_-]{1,64})\.[0-9a-f]{12}$/;
/** Statements longer than this are cut in the table; `show` prints them whole. */
const STATEMENT_CHARS = 72;

export interface LessonsIo {
  readonly apiUrl: string;
  /** Sent as the bearer token (`TETRALOOP_API_KEY`) when set. */
  readonly apiKey?: string | undefined;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

const processIo = (): LessonsIo => ({
  apiUrl: apiTargetFromEnv().url,
  apiKey: apiTargetFromEnv().token,
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
});

/** Runs `tetraloop lessons <args>`; answers the exit code. */
export async function lessonsCommand(args: readonly string[], io: LessonsIo = processIo()): Promise<number> {
  return exitCodeOf(io.stderr, async () => {
    const [command, ...rest] = args;
    switch (command) {
      case 'list':
        return await list(rest, io);
      case 'show':
        return await show(lessonIdArg('show', rest), io);
      case 'retire':
      case 'pin':
      case 'activate':
        return await override(command, lessonIdArg(command, rest), io);
      default:
        return otherSubcommand(command, { command: 'lessons', usage: LESSONS_USAGE }, io.stdout);
    }
  });
}

function lessonIdArg(command: string, args: readonly string[]): { id: string; agentId: string } {
  const { positionals } = parsing(`lessons ${command}`, () =>
    parseArgs({ args: [...args], options: {}, allowPositionals: true, strict: true }),
  );
  const [id, ...extra] = positionals;
  if (id === undefined)
    throw new UsageError(`lessons ${command} needs a lesson id: tetraloop lessons ${command} <lessonId>`);
  if (extra.length > 0)
    throw new UsageError(`lessons ${command} takes one lesson id, got ${positionals.length}`);
  const match = LESSON_ID.exec(id);
  if (!match)
    throw new UsageError(`lessons ${command}: '${id}' is not a lesson id (<agentId>.<12 hex digits>)`);
  // The agent a lesson belongs to is the part of its id before the last '.'.
  return { id, agentId: match[1]! };
}

async function list(args: readonly string[], io: LessonsIo): Promise<number> {
  const { values, positionals } = parsing('lessons list', () =>
    parseArgs({
      args: [...args],
      options: { status: { type: 'string' }, json: { type: 'boolean', default: false } },
      allowPositionals: true,
      strict: true,
    }),
  );
  const [agentId, ...extra] = positionals;
  if (agentId === undefined)
    throw new UsageError('lessons list needs an agent id: tetraloop lessons list <agentId>');
  if (extra.length > 0) throw new UsageError(`lessons list takes one agent id, got ${positionals.length}`);
  if (!AGENT_ID.test(agentId))
    throw new UsageError(`lessons list: '${agentId}' is not an agent id ([A-Za-z0-9_-]{1,64})`);
  const status = values.status as LessonStatus | undefined;
  if (status !== undefined && !LESSON_STATUSES.includes(status)) {
    throw new UsageError(`lessons list: --status must be one of ${LESSON_STATUSES.join(', ')}`);
  }
  const answer = await lessonsOf(io, agentId, status);
  if (values.json) {
    io.stdout(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  }
  const n = answer.lessons.length;
  const what = `${status ? `${status} ` : ''}lesson${n === 1 ? '' : 's'}`;
  if (n === 0) {
    io.stderr(`agent ${agentId} has no ${what} (lessons version ${answer.version})\n`);
    return 0;
  }
  io.stdout(lessonTable(answer.lessons));
  io.stderr(`agent ${agentId}: ${n} ${what} (lessons version ${answer.version})\n`);
  return 0;
}

async function show(lesson: { id: string; agentId: string }, io: LessonsIo): Promise<number> {
  const { lessons } = await lessonsOf(io, lesson.agentId);
  const found = lessons.find((l) => l.id === lesson.id);
  if (!found) {
    const others =
      lessons.length === 0
        ? 'no lessons'
        : `${lessons.length} other lesson${lessons.length === 1 ? '' : 's'} (tetraloop lessons list ${lesson.agentId})`;
    throw new CommandError(`no lesson ${lesson.id}: agent ${lesson.agentId} has ${others}`);
  }
  io.stdout(`${JSON.stringify(found, null, 2)}\n`);
  return 0;
}

async function override(
  command: Override,
  lesson: { id: string; agentId: string },
  io: LessonsIo,
): Promise<number> {
  const status = OVERRIDES[command];
  const after = await asking(io, async (client) => {
    try {
      return unwrap(
        await client.api.PATCH('/v1/lessons/{id}', { params: { path: { id: lesson.id } }, body: { status } }),
      );
    } catch (err) {
      if (err instanceof TetraloopApiError && err.code === 'lesson_not_found') {
        throw new CommandError(`no lesson ${lesson.id} (tetraloop lessons list ${lesson.agentId})`);
      }
      throw err;
    }
  });
  io.stdout(`${JSON.stringify(after, null, 2)}\n`);
  io.stderr(`lesson ${after.id} is ${after.status}\n`);
  return 0;
}

async function lessonsOf(io: LessonsIo, agentId: string, status?: LessonStatus): Promise<AgentLessons> {
  return asking(io, async (client) =>
    unwrap(
      await client.api.GET('/v1/agents/{agentId}/lessons', {
        params: { path: { agentId }, query: status ? { status } : {} },
      }),
    ),
  );
}

/** Asks the API; its refusals, and an API that is not there, end the command (exit 1). */
async function asking<T>(io: LessonsIo, ask: (client: TetraloopClient) => Promise<T>): Promise<T> {
  try {
    return await ask(clientOf({ url: io.apiUrl, token: io.apiKey }));
  } catch (err) {
    const said = describeFailure(err, 'TETRALOOP_API_KEY');
    if (said !== undefined) throw new CommandError(said);
    throw err;
  }
}

const scopeOf = (lesson: Lesson): string =>
  Object.entries(lesson.scope)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${v}`)
    .join(' ') || '-';

/** Lessons as an aligned text table, one line each. */
export function lessonTable(lessons: readonly Lesson[]): string {
  const header = ['ID', 'KIND', 'STATUS', 'CONFIDENCE', 'CASES', 'SCOPE', 'UPDATED', 'STATEMENT'];
  const rows = lessons.map((l) => [
    l.id,
    l.kind,
    l.status,
    l.confidence.toFixed(2),
    String(l.cases),
    scopeOf(l),
    l.updatedAt.replace(/\.\d+Z$/, 'Z'),
    cut(l.statement, STATEMENT_CHARS),
  ]);
  return textTable(header, rows);
}
