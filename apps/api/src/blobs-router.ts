/** `/v1/blobs/:hash`: the content of a blob, the large node output a run document shows as a stub. */
import { Router } from 'express';
import { blobHexOf, type RunStore } from '@tetraloop/core';
import { HttpError } from './http-errors.js';

export interface BlobsRouterDeps {
  readonly store: RunStore;
}

export function blobsRouter(deps: BlobsRouterDeps): Router {
  const router = Router();

  router.get('/:hash', async (req, res) => {
    // The stub's `$blob` as it is (`sha256:<hex>`), or the bare hex.
    const hex = blobHexOf(String(req.params.hash));
    if (hex === null) {
      throw new HttpError(400, 'invalid_request', 'the request is invalid', [
        { path: 'params.hash', message: 'must be sha256:<64 lowercase hex digits> or the 64 hex digits' },
      ]);
    }
    const text = await deps.store.blobs.text(hex);
    if (text === null) throw new HttpError(404, 'blob_not_found', 'no such blob');
    // The stored JSON text, sent as it is; it never changes under its hash.
    res.type('application/json').set('etag', `"sha256:${hex}"`).send(text);
  });

  return router;
}
