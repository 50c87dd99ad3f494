/**
 * Looking at runs: `GET /v1/runs`, the caller's tenant's runs, newest first, filtered by status,
 * agent, session, tag and creation time, a page at a time (only the tenant's own indexes are read,
 * so another tenant's run is never listed); and `GET /v1/runs/:id/explain`, where a run's time went.
 */
import type { RequestHandler } from 'express';
import { scopedName, unscopeName } from '@tetraloop/core/domain';
import { decodeRunCursor, encodeCursor, parseTimeBound, type RunSearch } from '@tetraloop/core/insight';
import type { RunService } from '@tetraloop/core/runs';
import type { RunStore } from '@tetraloop/core/state';
import type { RunPage } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { RunSearchQuery } from './requests.js';
import type { RouteName } from './route-table.js';
import { ownRunId } from './runs-router.js';

const TIME_BOUND =
  'an ISO time with its zone (2026-11-30T05:00:00Z) or a duration before now (90s, 15m, 1h, 7d)';

export interface RunInsightRouterDeps {
  readonly runs: RunService;
  readonly store: RunStore;
}

/**
 * A page of `tenant`'s runs matching `query` (the query of `GET /v1/runs`, parsed), as the API
 * answers it; a time bound or cursor it cannot read is a `400` naming its field.
 */
export async function searchRuns(
  runs: RunService,
  tenant: string,
  query: RunSearchQuery,
  now: number = Date.now(),
): Promise<RunPage> {
  const time = (name: 'since' | 'until'): number | undefined => {
    const text = query[name];
    if (text === undefined) return undefined;
    const at = parseTimeBound(text, now);
    if (at === undefined) throw invalid(`query.${name}`, `must be ${TIME_BOUND}`);
    return at;
  };
  const cursor = query.cursor === undefined ? undefined : decodeRunCursor(query.cursor);
  if (query.cursor !== undefined && cursor === undefined) {
    throw invalid('query.cursor', 'not a cursor this API handed out (nextCursor of an earlier page)');
  }
  const since = time('since');
  const until = time('until');
  const search: RunSearch = {
    ...(query.status ? { status: query.status } : {}),
    ...(query.agentId ? { agentId: query.agentId } : {}),
    // Stored tenant-scoped, as the run's session is.
    ...(query.sessionKey ? { sessionKey: scopedName(tenant, query.sessionKey) } : {}),
    ...(query.tag ? { tag: query.tag } : {}),
    ...(query.scheduleId ? { scheduleId: query.scheduleId } : {}),
    ...(query.triggerId ? { triggerId: query.triggerId } : {}),
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
    limit: query.limit,
    ...(cursor ? { cursor } : {}),
  };
  const page = await runs.search(tenant, search);
  return {
    runs: page.runs.map((run) =>
      run.sessionKey ? { ...run, sessionKey: unscopeName(run.sessionKey).name } : run,
    ),
    nextCursor: page.nextCursor ? encodeCursor(page.nextCursor) : null,
  };
}

export function runInsightHandlers(deps: RunInsightRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const list: RequestHandler = async (req, res) => {
    const query = RunSearchQuery.safeParse(req.query);
    if (!query.success) throw zodToHttp(query.error, ['query']);
    res.json(await searchRuns(deps.runs, callerOf(res).tenant, query.data));
  };

  const explain: RequestHandler = async (req, res) => {
    const runId = await ownRunId(deps.store, req, res);
    const explained = await deps.runs.explain(runId);
    if (!explained) throw new HttpError(404, 'run_not_found', 'no such run');
    res.json(explained);
  };

  return { 'runs.list': list, 'runs.explain': explain };
}

const invalid = (path: string, message: string): HttpError =>
  new HttpError(400, 'invalid_request', 'the request is invalid', [{ path, message }]);
