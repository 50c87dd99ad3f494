/**
 * Bull Board at /admin/queues, for the operator only: the root token as a bearer header, or a
 * login session — `POST /admin/login` with the token sets an HttpOnly, SameSite=Strict cookie whose
 * value is random and kept in Redis (as its hash) for a limited time; `Secure` when the request came
 * over HTTPS (`req.secure`: behind a TLS proxy, once `TETRALOOP_TRUST_PROXY` trusts it). No basic auth, which browsers
 * cache and resend. Read-only unless `TETRALOOP_ADMIN_READ_ONLY=false`. Bull Board's code loads at
 * the board's first request, not at the API's start.
 */
import { createHash, randomBytes } from 'node:crypto';
import express, { type Express, type Request, type RequestHandler, type Router } from 'express';
import type { ShownQueue } from '@tetraloop/core/queues';
import type { RedisClient } from '@tetraloop/core/runtime';
import { adminSessionKey } from '@tetraloop/core/state';
import { bearerOf, sameSecret } from './auth.js';

export const ADMIN_PATH = '/admin/queues';
const LOGIN_PATH = '/admin/login';
const LOGOUT_PATH = '/admin/logout';
const COOKIE = 'tl_admin';

export interface AdminBoardOptions {
  readonly token: string;
  readonly redis: RedisClient;
  readonly prefix: string;
  /** Every queue; a shard of the run queues is shown as `shard<i>.<name>` (see `bullBoard`). */
  readonly queues: readonly ShownQueue[];
  /**
   * Gives the board a way to show queues that appear later (a custom tool's queue, once a worker
   * publishes the tool): `show` replaces the queues shown.
   */
  readonly follow?: (show: (queues: readonly ShownQueue[]) => void) => void;
  readonly readOnly: boolean;
  /** How long a login lasts. @defaultValue 28800 (8 hours) */
  readonly sessionSeconds?: number;
}

export interface AdminBoard {
  mount(app: Express): void;
}

const hashOf = (value: string): string => createHash('sha256').update(value).digest('hex');

function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

const LOGIN_PAGE = `<!doctype html><meta charset="utf-8"><title>Tetraloop admin</title>
<form method="post" action="${LOGIN_PATH}" style="font:16px system-ui;margin:4em auto;max-width:24em">
<h1>Tetraloop admin</h1><label>Root token<br><input name="token" type="password" autocomplete="current-password" style="width:100%"></label>
<p><button type="submit">Sign in</button></p></form>`;

export function adminBoard(options: AdminBoardOptions): AdminBoard {
  const seconds = options.sessionSeconds ?? 28_800;
  const sessionKey = (value: string): string => adminSessionKey(options.prefix, hashOf(value));

  const signedIn = async (req: Request): Promise<boolean> => {
    const bearer = bearerOf(req);
    if (bearer) return sameSecret(bearer, options.token);
    const cookie = cookieOf(req, COOKIE);
    return cookie !== undefined && /^[A-Za-z0-9_-]{43}$/.test(cookie)
      ? (await options.redis.exists(sessionKey(cookie))) === 1
      : false;
  };

  const guard: RequestHandler = async (req, res, next) => {
    if (await signedIn(req)) return next();
    // A browser goes to the login page; anything else gets a plain 401.
    if (req.accepts(['json', 'html']) === 'html') return res.redirect(303, LOGIN_PATH);
    res.status(401).json({ error: { code: 'unauthorized', message: 'the root token is required' } });
  };

  return {
    mount(app) {
      app.get(LOGIN_PATH, (_req, res) => {
        res.type('html').set('cache-control', 'no-store').send(LOGIN_PAGE);
      });
      app.post(LOGIN_PATH, express.urlencoded({ extended: false, limit: '4kb' }), async (req, res) => {
        const body = req.body as { token?: unknown } | undefined;
        const token = typeof body?.token === 'string' ? body.token : '';
        if (!token || !sameSecret(token, options.token)) {
          return res.status(401).type('html').send(LOGIN_PAGE.replace('<p>', '<p>Wrong token.</p><p>'));
        }
        const value = randomBytes(32).toString('base64url');
        await options.redis.set(sessionKey(value), '1', 'EX', seconds);
        res.cookie(COOKIE, value, {
          httpOnly: true,
          sameSite: 'strict',
          secure: req.secure,
          path: '/admin',
          maxAge: seconds * 1000,
        });
        res.redirect(303, ADMIN_PATH);
      });
      app.post(LOGOUT_PATH, async (req, res) => {
        const cookie = cookieOf(req, COOKIE);
        if (cookie) await options.redis.del(sessionKey(cookie));
        res.clearCookie(COOKIE, { path: '/admin' }).redirect(303, LOGIN_PATH);
      });
      // The queues to show, kept from the start; the board, made at its first request.
      let queues = options.queues;
      let show: ((queues: readonly ShownQueue[]) => void) | undefined;
      options.follow?.((shown) => {
        queues = shown;
        show?.(shown);
      });
      let board: Promise<Router> | undefined;
      const boardRouter: RequestHandler = (req, res, next) => {
        board ??= bullBoard(queues, options.readOnly).then(
          (made) => {
            show = made.show;
            return made.router;
          },
          (err: unknown) => {
            board = undefined; // tried again at the next request
            throw err;
          },
        );
        board.then((router) => router(req, res, next)).catch(next);
      };
      app.use(ADMIN_PATH, guard, boardRouter);
    },
  };
}

export async function bullBoard(
  queues: readonly ShownQueue[],
  readOnlyMode: boolean,
): Promise<{ router: Router; show: (queues: readonly ShownQueue[]) => void }> {
  const [{ createBullBoard }, { BullMQAdapter }, { ExpressAdapter }] = await Promise.all([
    import('@bull-board/api'),
    import('@bull-board/api/bullMQAdapter'),
    import('@bull-board/express'),
  ]);
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(ADMIN_PATH);
  // The adapter is typed against BullMQ's Queue class; ours is that class. Bull Board tells
  // queues apart by name, and every shard's are named alike: a shard's name gets its index first.
  const adapters = (shown: readonly ShownQueue[]) =>
    shown.map(
      ({ queue, shard }) =>
        new BullMQAdapter(queue as never, {
          readOnlyMode,
          ...(shard === undefined
            ? {}
            : { prefix: `shard${shard}.`, displayName: `${queue.name} (shard ${shard})` }),
        }),
    );
  const board = createBullBoard({ queues: adapters(queues), serverAdapter });
  return {
    router: serverAdapter.getRouter() as Router,
    show: (shown) => board.replaceQueues(adapters(shown)),
  };
}
