import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { everyMs, scheduleBodyOf } from './schedule-body.js';
import { cadenceText, firingsText, intervalText } from './schedules-text.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tetraloop-schedule-body-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('scheduleBodyOf', () => {
  it('makes a task request from --task and --agent, sending only the flags given', async () => {
    expect(
      await scheduleBodyOf({
        name: 'weekdays',
        cron: '0 7 * * 1-5',
        timezone: 'Europe/Paris',
        task: 'summarise the night',
        agent: 'ops',
      }),
    ).toEqual({
      name: 'weekdays',
      cron: '0 7 * * 1-5',
      timezone: 'Europe/Paris',
      request: { task: 'summarise the night', agentId: 'ops' },
    });
  });

  it('reads a request file, --agent over its agent, and the policies', async () => {
    const file = join(dir, 'request.json');
    await writeFile(file, JSON.stringify({ task: 't', agentId: 'main', tags: ['x'] }));
    expect(
      await scheduleBodyOf({
        name: 'n',
        every: '15m',
        request: file,
        agent: 'ops',
        overlap: 'cancel_previous',
        'catch-up': 'latest',
        paused: true,
      }),
    ).toEqual({
      name: 'n',
      everyMs: 900_000,
      overlap: 'cancel_previous',
      catchUp: 'latest',
      paused: true,
      request: { task: 't', agentId: 'ops', tags: ['x'] },
    });
  });

  it('refuses a request file that is not an object', async () => {
    const file = join(dir, 'list.json');
    await writeFile(file, '[1]');
    await expect(scheduleBodyOf({ name: 'n', every: '1h', request: file })).rejects.toThrow(
      /is not a run request/,
    );
  });
});

describe('schedule text', () => {
  it('reads --every in milliseconds or with a unit', () => {
    expect(everyMs('60000')).toBe(60_000);
    expect(everyMs('90s')).toBe(90_000);
    expect(everyMs('1d')).toBe(86_400_000);
    expect(() => everyMs('1.5h')).toThrow(/--every takes milliseconds/);
  });

  it('shows an interval in its largest exact unit, and a cron pattern with its zone', () => {
    expect(intervalText(5_400_000)).toBe('90m');
    expect(intervalText(1500)).toBe('1500ms');
    expect(cadenceText({ cron: '0 7 * * 1-5', timezone: 'Europe/Paris', everyMs: null })).toBe(
      'cron 0 7 * * 1-5 Europe/Paris',
    );
    expect(cadenceText({ cron: null, timezone: null, everyMs: 86_400_000 })).toBe('every 1d');
  });

  it('counts firings in the order outcomes are defined, leaving out zeros', () => {
    expect(firingsText({ refused: 1, started: 4, missed: 0, skipped_overlap: 2 })).toBe(
      'started 4, skipped_overlap 2, refused 1',
    );
    expect(firingsText({ started: 0 })).toBe('-');
  });
});
