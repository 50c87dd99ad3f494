import { describe, expect, it } from 'vitest';
import { routeOf, paths } from './routes.js';

describe('routeOf', () => {
  it('reads every page back from the path it makes', () => {
    expect(routeOf(paths.runs())).toEqual({ page: 'runs' });
    expect(routeOf('/console')).toEqual({ page: 'runs' });
    expect(routeOf(paths.run('r 1'))).toEqual({ page: 'run', runId: 'r 1' });
    expect(routeOf(paths.sessions())).toEqual({ page: 'sessions' });
    expect(routeOf(paths.session('a/b'))).toEqual({ page: 'session', sessionKey: 'a/b' });
    expect(routeOf(paths.lessons('main'))).toEqual({ page: 'lessons', agentId: 'main' });
    expect(routeOf(paths.schedules())).toEqual({ page: 'schedules' });
    expect(routeOf(paths.triggers())).toEqual({ page: 'triggers' });
    expect(routeOf('/console/nope/x')).toEqual({ page: 'missing' });
    expect(routeOf('/docs')).toEqual({ page: 'missing' });
  });

  it('searches the runs list for a schedule’s or a trigger’s runs', () => {
    expect(paths.scheduleRuns('sch_1')).toBe('/console/?scheduleId=sch_1');
    expect(paths.triggerRuns('trg_1')).toBe('/console/?triggerId=trg_1');
    expect(routeOf('/console/')).toEqual({ page: 'runs' });
  });
});
