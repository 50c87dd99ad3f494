/**
 * A wait node's static checks, through the validation a run request gets: one form per node
 * (signal, until or forMs), a sleep takes no signal wait's fields, and no wait lasts longer than
 * the deployment's longest (`TETRALOOP_MAX_WAIT_DAYS`), each refusal at the field that is wrong.
 */
import { describe, expect, it } from 'vitest';
import { validateGraph } from './validate.js';
import { builtinTools } from '../tools/builtins.js';
import { parseAllowHosts } from '../tools/egress-policy.js';

const tools = builtinTools({ egress: parseAllowHosts('') });
const DAY = 86_400_000;
const now = Date.parse('2026-12-01T00:00:00Z');

const check = (wait: object, maxWaitMs?: number) =>
  validateGraph(
    {
      nodes: [
        { id: 'w', kind: 'wait', ...wait },
        { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'w.output' } } },
      ],
      edges: [['w', 'after']],
    },
    { tools, now, ...(maxWaitMs !== undefined ? { maxWaitMs } : {}) },
  );
const issues = (wait: object, maxWaitMs?: number) => {
  const result = check(wait, maxWaitMs);
  return result.ok ? [] : result.issues;
};

describe('wait nodes', () => {
  it('accept a signal, an ISO instant or a duration, each within the longest wait', () => {
    expect(check({ signal: 'go', timeoutSeconds: 29 * 86_400 }).ok).toBe(true);
    expect(check({ until: '2026-12-24T09:00:00Z' }).ok).toBe(true);
    expect(check({ until: '2026-12-24T10:00:00+01:00' }).ok).toBe(true);
    expect(check({ forMs: 2000 }).ok).toBe(true);
    expect(check({ forMs: 30 * DAY }).ok).toBe(true);
    // A deployment that allows longer waits accepts them.
    expect(check({ forMs: 60 * DAY }, 90 * DAY).ok).toBe(true);
  });

  it('refuse a wait past the longest wait at its field', () => {
    const limit = 'at most 30 days (TETRALOOP_MAX_WAIT_DAYS)';
    expect(issues({ forMs: 30 * DAY + 1 })).toEqual([{ path: 'nodes.0.forMs', message: `must be ${limit}` }]);
    expect(issues({ until: '2027-01-01T00:00:01Z' })).toEqual([
      { path: 'nodes.0.until', message: `must be ${limit} from now` },
    ]);
    expect(issues({ signal: 'go', timeoutSeconds: 31 * 86_400 })).toEqual([
      { path: 'nodes.0.timeoutSeconds', message: `must be ${limit}` },
    ]);
    expect(issues({ forMs: 3 * DAY }, 2 * DAY)).toEqual([
      { path: 'nodes.0.forMs', message: 'must be at most 2 days (TETRALOOP_MAX_WAIT_DAYS)' },
    ]);
  });

  it('refuse a date that is not ISO 8601 with a zone, and a duration that is not a positive integer', () => {
    for (const until of ['next monday', '2026-12-24', '2026-12-24T09:00:00', 1766566800000])
      expect(
        issues({ until }).map((i) => i.path),
        String(until),
      ).toEqual(['nodes.0.until']);
    for (const forMs of [0, -5, 1.5, '2000'])
      expect(
        issues({ forMs }).map((i) => i.path),
        String(forMs),
      ).toEqual(['nodes.0.forMs']);
  });

  it('take exactly one form, and a sleep none of a signal wait’s fields', () => {
    expect(issues({})).toEqual([{ path: 'nodes.0.signal', message: 'give one of signal, until and forMs' }]);
    expect(issues({ signal: 'go', forMs: 10 }).map((i) => i.path)).toEqual(['nodes.0.forMs']);
    expect(issues({ until: '2026-12-24T09:00:00Z', forMs: 10 }).map((i) => i.path)).toEqual([
      'nodes.0.forMs',
    ]);
    expect(issues({ forMs: 10, timeoutSeconds: 5, onTimeout: 'continue', acceptEarly: true })).toEqual(
      ['timeoutSeconds', 'onTimeout', 'acceptEarly'].map((field) => ({
        path: `nodes.0.${field}`,
        message: 'only a wait for a signal takes this field',
      })),
    );
  });
});
