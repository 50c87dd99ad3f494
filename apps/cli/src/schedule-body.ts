/**
 * The body of `POST /v1/schedules` from `tetraloop schedules create`'s flags, checked here with the
 * API's own schema so a mistake names the flag that made it (exit 2) before anything is sent. The
 * run request itself (its graph, its agent) is checked by the API, which knows the agents.
 */
import { readFile } from 'node:fs/promises';
import type { ScheduleBody } from '@tetraloop/client';
import { ScheduleRequest } from '@tetraloop/core/schedules';
import { UsageError } from './cli-args.js';

export interface CreateFlags {
  readonly name?: string | undefined;
  readonly cron?: string | undefined;
  readonly timezone?: string | undefined;
  readonly every?: string | undefined;
  readonly overlap?: string | undefined;
  readonly 'catch-up'?: string | undefined;
  readonly paused?: boolean | undefined;
  readonly request?: string | undefined;
  readonly task?: string | undefined;
  readonly agent?: string | undefined;
}

/** The flag each field of the body comes from, for messages. */
const FLAG: Record<string, string> = {
  name: '--name',
  cron: '--cron',
  timezone: '--timezone',
  everyMs: '--every',
  overlap: '--overlap',
  catchUp: '--catch-up',
  paused: '--paused',
  request: '--request/--task',
};

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--every`: milliseconds (`60000`), or a number with a unit (`90s`, `15m`, `1h`, `1d`). */
export function everyMs(given: string): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(given.trim());
  if (!m)
    throw new UsageError(`schedules create: --every takes milliseconds or 90s, 15m, 1h, 1d; got '${given}'`);
  return Number(m[1]) * UNIT_MS[m[2] ?? 'ms']!;
}

/** The run request each firing submits: a file's (`--request`), or a task (`--task`). */
async function runRequestOf(flags: CreateFlags): Promise<Record<string, unknown>> {
  if ((flags.request === undefined) === (flags.task === undefined)) {
    throw new UsageError('schedules create needs the run to start: --request <file.json> or --task <text>');
  }
  let request: Record<string, unknown>;
  if (flags.task !== undefined) {
    request = { task: flags.task };
  } else {
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(flags.request!, 'utf8'));
    } catch (err) {
      throw new UsageError(`schedules create: --request ${flags.request}: ${(err as Error).message}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new UsageError(
        `schedules create: --request ${flags.request} is not a run request (a JSON object)`,
      );
    }
    request = parsed as Record<string, unknown>;
  }
  return flags.agent === undefined ? request : { ...request, agentId: flags.agent };
}

/** The schedule `create`'s flags describe; a usage error names every flag that is wrong. */
export async function scheduleBodyOf(flags: CreateFlags): Promise<ScheduleBody> {
  if (flags.name === undefined) throw new UsageError('schedules create needs --name <name>');
  if ((flags.cron === undefined) === (flags.every === undefined)) {
    throw new UsageError(
      'schedules create needs when to fire: --cron <pattern> [--timezone <zone>] or --every <ms>',
    );
  }
  const body = {
    name: flags.name,
    ...(flags.cron !== undefined ? { cron: flags.cron } : {}),
    ...(flags.timezone !== undefined ? { timezone: flags.timezone } : {}),
    ...(flags.every !== undefined ? { everyMs: everyMs(flags.every) } : {}),
    ...(flags.overlap !== undefined ? { overlap: flags.overlap } : {}),
    ...(flags['catch-up'] !== undefined ? { catchUp: flags['catch-up'] } : {}),
    ...(flags.paused ? { paused: true } : {}),
    request: await runRequestOf(flags),
  };
  const checked = ScheduleRequest.safeParse(body);
  if (!checked.success) {
    const issues = checked.error.issues.map((i) => {
      const field = String(i.path[0] ?? '');
      return `  ${FLAG[field] ?? field}: ${i.message}`;
    });
    throw new UsageError(`schedules create: invalid options\n${issues.join('\n')}`);
  }
  // The flags as given: the API fills the defaults it documents.
  return body as ScheduleBody;
}
