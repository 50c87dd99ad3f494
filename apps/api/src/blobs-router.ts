/** `/v1/blobs/:hash`: the content of a blob, the large node output a run document shows as a stub. */
import type { RequestHandler } from 'express';
import { blobHexOf, type RunStore } from '@tetraloop/core';
import { callerOf } from './auth.js';
import { HttpError } from './http-errors.js';
import type { RouteName } from './route-table.js';

export interface BlobsRouterDeps {
  readonly store: RunStore;
}

export function blobHandlers(deps: BlobsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const get: RequestHandler = async (req, res) => {
    // The stub's `$blob` as it is (`sha256:<hex>`), or the bare hex.
    const hex = blobHexOf(String(req.params.hash));
    if (hex === null) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        { path: 'params.hash', message: 'must be sha256:<64 lowercase hex digits> or the 64 hex digits' },
      ]);
    }
    const text = await deps.store.blobs.text(callerOf(res).tenant, hex);
    if (text === null) throw new HttpError(404, 'blob_not_found', 'no such blob');
    // The stored JSON text, sent as it is; it never changes under its hash.
    res.type('application/json').set('etag', `"sha256:${hex}"`).send(text);
  };
  return { 'blobs.get': get };
}
