/**
 * `tetraloop triggers …` and `tetraloop events send`: the tenant's triggers (list, make from a
 * JSON file, delete) and an event sent to them, through the API at `TETRALOOP_API_URL` with
 * `TETRALOOP_API_KEY` as the bearer key (see docs/triggers.md). Exit codes: 0 done, 1 the API said
 * no or cannot be reached, 2 a usage error.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  TetraloopApiError,
  unwrap,
  type TetraloopClient,
  type Trigger,
  type TriggerBody,
} from '@tetraloop/client';
import { apiTargetFromEnv, clientOf, describeFailure } from './api-client.js';
import { CommandError, UsageError, exitCodeOf, otherSubcommand, parsing } from './cli-args.js';
import { cut, shortTime, textTable } from './text-table.js';

export const TRIGGERS_USAGE = `usage: tetraloop triggers <command>

  list [--json]                         the tenant's triggers, as a table (--json: the API's answer)
  create <trigger.json|->               make a trigger from a JSON body (POST /v1/triggers); prints it
  delete <triggerId>                    delete a trigger: its waiting firings start nothing

A trigger body is {"event", "filter"?, "request", "debounce"?, "batch"?} (docs/triggers.md).`;

export const EVENTS_USAGE = `usage: tetraloop events send <name> [--payload <json>] [--id <id>] [--key <key>]

  send an event to the tenant's triggers (POST /v1/events); an id taken within a day is a duplicate`;

const CLIENT_NOTE = `The API is TETRALOOP_API_URL (default http://localhost:3000); TETRALOOP_API_KEY, when set, is
sent as its bearer key (triggers:read to list, triggers:write to make and delete, events:write to send).`;

export interface TriggersIo {
  readonly apiUrl: string;
  readonly apiKey?: string | undefined;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** Reads a trigger file (`-`: standard input). */
  readonly read: (path: string) => string;
}

const processIo = (): TriggersIo => ({
  apiUrl: apiTargetFromEnv().url,
  apiKey: apiTargetFromEnv().token,
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  read: (path) => readFileSync(path === '-' ? 0 : path, 'utf8'),
});

/** Runs a command, mapping its failures to exit codes. */
/** Asks the API; its refusals (each issue with its field), and an API not there, end the command. */
async function asking<T>(io: TriggersIo, ask: (client: TetraloopClient) => Promise<T>): Promise<T> {
  try {
    return await ask(clientOf({ url: io.apiUrl, token: io.apiKey }));
  } catch (err) {
    const said = describeFailure(err, 'TETRALOOP_API_KEY');
    if (said === undefined) throw err;
    const issues = err instanceof TetraloopApiError ? (err.issues ?? []) : [];
    throw new CommandError([said, ...issues.map((i) => `  ${i.path || '(body)'}: ${i.message}`)].join('\n'));
  }
}

const positional = (command: string, args: readonly string[], what: string): string => {
  const { positionals } = parsing(command, () =>
    parseArgs({ args: [...args], options: {}, allowPositionals: true, strict: true }),
  );
  if (positionals.length !== 1) throw new UsageError(`${command} takes one ${what}`);
  return positionals[0]!;
};

/** Runs `tetraloop triggers <args>`; answers the exit code. */
export function triggersCommand(args: readonly string[], io: TriggersIo = processIo()): Promise<number> {
  return exitCodeOf(io.stderr, async () => {
    const [command, ...rest] = args;
    switch (command) {
      case 'list':
        return list(rest, io);
      case 'create':
        return create(positional('triggers create', rest, 'file (or -)'), io);
      case 'delete':
        return remove(positional('triggers delete', rest, 'trigger id'), io);
      default:
        return otherSubcommand(
          command,
          { command: 'triggers', usage: TRIGGERS_USAGE, help: `${TRIGGERS_USAGE}\n${CLIENT_NOTE}` },
          io.stdout,
        );
    }
  });
}

async function list(args: readonly string[], io: TriggersIo): Promise<number> {
  const { values } = parsing('triggers list', () =>
    parseArgs({ args: [...args], options: { json: { type: 'boolean', default: false } }, strict: true }),
  );
  const answer = await asking(io, async (client) => unwrap(await client.api.GET('/v1/triggers')));
  if (values.json) {
    io.stdout(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  }
  if (answer.triggers.length === 0) {
    io.stderr('no triggers\n');
    return 0;
  }
  io.stdout(triggerTable(answer.triggers));
  return 0;
}

async function create(path: string, io: TriggersIo): Promise<number> {
  let body: TriggerBody;
  try {
    body = JSON.parse(io.read(path)) as TriggerBody;
  } catch (err) {
    throw new UsageError(`triggers create: cannot read ${path} as JSON: ${(err as Error).message}`);
  }
  const made = await asking(io, async (client) => unwrap(await client.api.POST('/v1/triggers', { body })));
  io.stdout(`${JSON.stringify(made, null, 2)}\n`);
  io.stderr(`trigger ${made.id} listens for ${made.event}\n`);
  return 0;
}

async function remove(id: string, io: TriggersIo): Promise<number> {
  await asking(io, async (client) =>
    unwrap(await client.api.DELETE('/v1/triggers/{id}', { params: { path: { id } } })),
  );
  io.stderr(`trigger ${id} deleted\n`);
  return 0;
}

/** How a trigger fires, in a word. */
const modeOf = (t: Trigger): string =>
  t.debounce
    ? `debounce ${t.debounce.ms}ms`
    : t.batch
      ? `batch ${t.batch.maxSize}/${t.batch.maxWaitMs}ms`
      : 'each';

/** Triggers as an aligned text table, one line each. */
export function triggerTable(triggers: readonly Trigger[]): string {
  return textTable(
    ['ID', 'EVENT', 'FIRES', 'FILTER', 'CREATED'],
    triggers.map((t) => [
      t.id,
      t.event,
      modeOf(t),
      t.filter === undefined ? '-' : cut(JSON.stringify(t.filter), 48),
      shortTime(t.createdAt),
    ]),
  );
}

/** Runs `tetraloop events send <args>`; answers the exit code. */
export function eventsCommand(args: readonly string[], io: TriggersIo = processIo()): Promise<number> {
  return exitCodeOf(io.stderr, async () => {
    const [command, ...rest] = args;
    if (command !== 'send') throw new UsageError(EVENTS_USAGE);
    const { values, positionals } = parsing('events send', () =>
      parseArgs({
        args: [...rest],
        options: { payload: { type: 'string' }, id: { type: 'string' }, key: { type: 'string' } },
        allowPositionals: true,
        strict: true,
      }),
    );
    if (positionals.length !== 1) throw new UsageError(`events send takes one event name\n\n${EVENTS_USAGE}`);
    let payload: unknown;
    try {
      payload = values.payload === undefined ? undefined : JSON.parse(values.payload);
    } catch {
      throw new UsageError('events send: --payload must be JSON');
    }
    const body = {
      name: positionals[0]!,
      ...(payload !== undefined ? { payload } : {}),
      ...(values.id !== undefined ? { id: values.id } : {}),
      ...(values.key !== undefined ? { key: values.key } : {}),
    };
    const sent = await asking(io, async (client) => unwrap(await client.api.POST('/v1/events', { body })));
    io.stdout(`${JSON.stringify(sent)}\n`);
    if (sent.duplicate) io.stderr(`event ${sent.id} was taken before: nothing more starts\n`);
    return 0;
  });
}
