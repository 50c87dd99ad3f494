/**
 * Bull Board at /admin/queues, behind an admin token (a bearer header, or basic auth with the
 * token as password). With no token configured the board is not mounted at all.
 */
import { timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { RequestHandler, Router } from 'express';

export const ADMIN_PATH = '/admin/queues';

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Accepts `Authorization: Bearer <token>` or basic auth whose password is the token. */
export function adminAuth(token: string): RequestHandler {
  return (req, res, next) => {
    const header = req.get('authorization') ?? '';
    const [scheme = '', value = ''] = header.split(' ');
    let given = '';
    if (scheme.toLowerCase() === 'bearer') given = value;
    if (scheme.toLowerCase() === 'basic')
      given = Buffer.from(value, 'base64').toString().split(':').slice(1).join(':');
    if (given && sameToken(given, token)) return next();
    res
      .set('www-authenticate', 'Basic realm="tetraloop"')
      .status(401)
      .json({ error: { code: 'unauthorized', message: 'admin token required' } });
  };
}

export function bullBoard(queues: readonly Queue[], readOnlyMode: boolean): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(ADMIN_PATH);
  createBullBoard({
    // The adapter is typed against BullMQ's Queue class; ours is that class.
    queues: queues.map((q) => new BullMQAdapter(q as never, { readOnlyMode })),
    serverAdapter,
  });
  return serverAdapter.getRouter() as Router;
}
