/** Who makes a request, as the routes and middlewares read it. */
import type { Response } from 'express';
import { OPEN_CALLER, type Caller } from '@tetraloop/core';

/**
 * The caller of this request: what the auth middleware put in `res.locals.caller`, or the open
 * caller (root, default tenant, no key) when none did (auth off). The one place that reads it.
 */
export const callerOf = (res: Response): Caller => (res.locals as { caller?: Caller }).caller ?? OPEN_CALLER;
