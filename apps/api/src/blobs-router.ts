/** `/v1/blobs/:hash`: the content of a blob, the large node output a run document shows as a stub. */
import type { RequestHandler } from 'express';
import { blobHexOf } from '@tetraloop/core/domain';
import type { RunStore } from '@tetraloop/core/state';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import { BlobHash } from './requests.js';
import type { RouteName } from './route-table.js';

export interface BlobsRouterDeps {
  readonly store: RunStore;
}

export function blobHandlers(deps: BlobsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const get: RequestHandler = async (req, res) => {
    // The stub's `$blob` as it is (`sha256:<hex>`), or the bare hex.
    const hash = BlobHash.safeParse(req.params.hash);
    if (!hash.success) throw zodToHttp(hash.error, ['params', 'hash']);
    const hex = blobHexOf(hash.data)!;
    const text = await deps.store.blobs.text(callerOf(res).tenant, hex);
    if (text === null) throw new HttpError(404, 'blob_not_found', 'no such blob');
    // The stored JSON text, sent as it is; it never changes under its hash.
    res.type('application/json').set('etag', `"sha256:${hex}"`).send(text);
  };
  return { 'blobs.get': get };
}
