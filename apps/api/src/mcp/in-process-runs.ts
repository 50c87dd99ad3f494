/**
 * The MCP tools' backend inside the API process (`/mcp`): the run services themselves, as one
 * caller — its tenant for everything (another tenant's run is no run at all), its scopes for
 * writing (`runs:write` to submit and cancel; the route asks `runs:read` of every call), and the
 * same validation, durability barrier and caps on waits as `/v1/runs`.
 */
import { hasScope, type Caller, type RunDocument } from '@tetraloop/core/domain';
import type { AcceptBarrier } from '@tetraloop/core/durability';
import { RunRequest, type RunEventHub, type RunService, type RunWaiter } from '@tetraloop/core/runs';
import { isCluster, isRedisUnavailable, type RedisClient } from '@tetraloop/core/runtime';
import type { RunStore } from '@tetraloop/core/state';
import type { Logger } from 'pino';
import { HttpError, knownHttpError, zodToHttp } from '../http-errors.js';
import type { LongRequests } from '../long-requests.js';
import { RunIdParam } from '../requests.js';
import { isFinalEvent } from '../run-events.js';
import { searchRuns } from '../run-insight-router.js';
import { clientView, confirmAccept, runNotFound } from '../runs-router.js';
import type { RunBackend } from './run-tools.js';
import { SettledNodes, type RunProgress } from './settled-nodes.js';

export interface InProcessRunsDeps {
  readonly runs: RunService;
  readonly store: RunStore;
  readonly waiter: RunWaiter;
  /** Follows a run's events for a call that asked for progress. */
  readonly hub: RunEventHub;
  /** A waiting call holds a `wait` slot, as `GET /v1/runs/:id/wait` does. */
  readonly longRequests: LongRequests;
  /** `TETRALOOP_MAX_WAIT_MS`: the longest a call waits, whatever its `timeoutMs`. */
  readonly maxWaitMs: number;
  readonly acceptBarrier?: AcceptBarrier;
  /** The API's Redis: on a cluster, a redirection it could not follow is an outage too. */
  readonly redis: RedisClient;
  readonly logger: Logger;
  /** How long a progress follower waits for events before it looks whether the run settled. @defaultValue 15000 */
  readonly keepAliveMs?: number;
}

/** A refusal as the tool error's text: the status and code an HTTP client would get, and the issues. */
const refusalText = (err: HttpError): string =>
  `${err.status} ${err.code}: ${err.message}${err.issues.map((i) => `\n  ${i.path}: ${i.message}`).join('')}`;

export function inProcessRuns(deps: InProcessRunsDeps, caller: Caller): RunBackend {
  const { tenant } = caller;

  const requireWrite = (): void => {
    if (!hasScope(caller, 'runs:write')) {
      throw new HttpError(403, 'forbidden', 'the API key lacks the scope runs:write');
    }
  };

  /** The caller's run, or `404` for one that is not there or is another tenant's. */
  const ownRun = async (runId: string): Promise<RunDocument> => {
    if (!RunIdParam.safeParse(runId).success) throw runNotFound();
    const doc = await deps.runs.get(runId);
    if (!doc || doc.tenant !== tenant) throw runNotFound();
    return doc;
  };

  /**
   * Tells `onProgress` of each node of the run that settles, from the first event on, until the
   * run's final event (or `waitMs`, or `signal`): the run's event stream is the wait itself, so
   * every report goes out before the answer.
   */
  const followProgress = async (
    doc: RunDocument,
    waitMs: number,
    onProgress: (p: RunProgress) => Promise<void>,
    signal: AbortSignal,
  ): Promise<void> => {
    const nodes = Object.keys(doc.nodes).length;
    const tally = new SettledNodes(nodes > 0 ? nodes : undefined);
    const feed = deps.hub.follow(doc.runId, 0);
    const stop = (): void => feed.close();
    const timer = setTimeout(stop, waitMs);
    signal.addEventListener('abort', stop, { once: true });
    try {
      let events = await feed.next(0);
      for (;;) {
        for (const e of events) {
          const progress = tally.read(e);
          if (progress) await onProgress(progress);
          if (await isFinalEvent(deps.store, doc.runId, e)) return;
        }
        // A settled run whose events are gone (past retention) has no final event to come.
        if (events.length === 0 && (await deps.runs.settled(doc.runId)) !== false) return;
        if (feed.closed) return;
        events = await feed.next(deps.keepAliveMs ?? 15_000);
      }
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', stop);
      feed.close();
    }
  };

  return {
    async submit(request) {
      requireWrite();
      const body = RunRequest.safeParse(request);
      if (!body.success) throw zodToHttp(body.error);
      const result = await deps.runs.submit(body.data, undefined, { tenant });
      await confirmAccept(deps.acceptBarrier, result.runId);
      return { runId: result.runId, status: result.status, acceptedAt: result.acceptedAt };
    },

    async wait(runId, timeoutMs, onProgress, signal) {
      const doc = await ownRun(runId);
      if (doc.finishedAt !== null && !onProgress) return clientView(doc);
      const waitMs = Math.min(timeoutMs, deps.maxWaitMs);
      const release = deps.longRequests.hold('wait', tenant);
      try {
        if (onProgress) await followProgress(doc, waitMs, onProgress, signal);
        else {
          await deps.waiter.wait(
            runId,
            waitMs,
            async () => (await deps.runs.settled(runId)) !== false,
            signal,
          );
        }
      } finally {
        release();
      }
      return clientView(await ownRun(runId));
    },

    async get(runId) {
      return clientView(await ownRun(runId));
    },

    async cancel(runId) {
      requireWrite();
      await ownRun(runId);
      const result = await deps.runs.cancel(runId);
      if (!result) throw runNotFound();
      return { runId, status: result.status };
    },

    async list(search) {
      return { ...(await searchRuns(deps.runs, tenant, search)) };
    },

    describeFailure(err) {
      const known = knownHttpError(err);
      if (known) return refusalText(known);
      if (isRedisUnavailable(err, { clustered: isCluster(deps.redis) }))
        return '503 unavailable: Redis is unavailable; retry in a moment';
      // Not the client's doing: logged here, and the tool error says no more than the API would.
      deps.logger.error({ err }, 'MCP tool call failed');
      return '500 internal: internal error';
    },

    isNotFound(err) {
      return knownHttpError(err)?.status === 404;
    },
  };
}
