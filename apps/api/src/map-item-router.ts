/**
 * `GET /v1/runs/:id/nodes/:nodeId/items/:index`: one item of a map node, as the run document shows
 * a node — its snapshot once it settled, its live state while it runs, `pending` before it starts.
 * The map's own node in the run document holds the items' outputs; this is where each item's
 * attempts, input and error are kept.
 */
import type { RequestHandler } from 'express';
import type { NodeView } from '@tetraloop/core/domain';
import type { RunStore } from '@tetraloop/core/state';
import { HttpError } from './http-errors.js';
import type { RouteName } from './route-table.js';
import { ownRunId } from './runs-router.js';

const INDEX = /^(0|[1-9]\d{0,4})$/;

export function mapItemHandlers(deps: {
  readonly store: RunStore;
}): Partial<Record<RouteName, RequestHandler>> {
  const item: RequestHandler = async (req, res) => {
    const runId = await ownRunId(deps.store, req, res);
    const nodeId = String(req.params.nodeId);
    const raw = String(req.params.index);
    if (!INDEX.test(raw)) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        { path: 'params.index', message: 'an item index: an integer from 0' },
      ]);
    }
    const index = Number(raw);
    const found = await deps.store.item(runId, nodeId, index);
    // A node that is no map, a map that has not started its items, or an index past its list.
    if (found.total === null || index >= found.total) {
      throw new HttpError(404, 'item_not_found', `node "${nodeId}" has no item ${index}`);
    }
    const id = `${nodeId}[${index}]`;
    const view: NodeView = found.snapshot
      ? { id, ...found.snapshot }
      : found.live
        ? { id, ...found.live, attempts: [] }
        : { id, status: 'pending', attempts: [] };
    res.json(view);
  };
  return { 'runs.item': item };
}
