/**
 * The deployment's flow limits over HTTP, for the operator (root token only: limits span every
 * tenant). `GET` shows the limits in force, where they come from and the counters in use; `PUT`
 * replaces the configured limits (`TETRALOOP_LIMITS`) for every process until `DELETE` goes back to
 * them. Workers pick a change up within `TETRALOOP_LIMITS_REFRESH_MS`.
 */
import type { RequestHandler } from 'express';
import { LimitsDocument } from '@tetraloop/core/flow';
import type { FlowStore } from '@tetraloop/core/state';
import type { LimitsView } from './answers.js';
import { zodToHttp } from './http-errors.js';
import { limitsDocumentOf } from './requests.js';
import type { RouteName } from './route-table.js';

export interface LimitsRouterDeps {
  readonly flow: FlowStore;
  /** `TETRALOOP_LIMITS` as this process parsed it. */
  readonly configuredLimits: LimitsDocument;
}

export function limitHandlers(deps: LimitsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const view = async () => {
    const stored = await deps.flow.storedLimits();
    return {
      ...(stored ?? { document: deps.configuredLimits }),
      source: stored ? ('api' as const) : ('configuration' as const),
      counters: await deps.flow.counters(),
    };
  };
  const show = (doc: Awaited<ReturnType<typeof view>>): LimitsView => ({
    limits: doc.document.limits,
    source: doc.source,
    ...('version' in doc ? { version: doc.version, updatedAt: doc.updatedAt } : {}),
    counters: doc.counters,
  });

  const get: RequestHandler = async (_req, res) => {
    res.json(show(await view()));
  };

  const put: RequestHandler = async (req, res) => {
    // A bare list is the list of limits, as in TETRALOOP_LIMITS.
    const parsed = LimitsDocument.safeParse(limitsDocumentOf(req.body));
    if (!parsed.success) throw zodToHttp(parsed.error);
    await deps.flow.putLimits(parsed.data);
    res.json(show(await view()));
  };

  const remove: RequestHandler = async (_req, res) => {
    await deps.flow.clearLimits();
    res.json(show(await view()));
  };

  return { 'limits.get': get, 'limits.put': put, 'limits.delete': remove };
}
