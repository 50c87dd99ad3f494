/**
 * Request metrics of the API by route: requests by status, their duration, and error answers by
 * code. The route label is the route's name in the route table (`runs.submit`, …), found from the
 * method and path even when a request is refused before it reaches its handler (a body too large,
 * JSON too deep), so labels stay bounded: no ids, no paths.
 */
import type { RequestHandler, Response } from 'express';
import { metrics } from '@tetraloop/core/telemetry';
import { ROUTES, type RouteName } from './route-table.js';

const MATCHERS = (Object.entries(ROUTES) as [RouteName, (typeof ROUTES)[RouteName]][]).map(
  ([name, route]) => ({
    name,
    method: route.method.toUpperCase(),
    pattern: new RegExp(`^${route.path.replace(/:[A-Za-z]+/g, '[^/]+')}/?$`),
  }),
);

/** Route names by `METHOD path` as Express registered them (`req.route.path`). */
const BY_ROUTE = new Map(
  (Object.entries(ROUTES) as [RouteName, (typeof ROUTES)[RouteName]][]).map(([name, route]) => [
    `${route.method.toUpperCase()} ${route.path}`,
    name,
  ]),
);

/** The route label of a request: its route's name, or what else it reached. */
export function routeLabel(method: string, path: string): string {
  const hit = MATCHERS.find((m) => m.method === method && m.pattern.test(path));
  if (hit) return hit.name;
  if (path === '/healthz' || path === '/readyz') return 'health';
  if (path === '/metrics') return 'metrics';
  if (path.startsWith('/admin')) return 'admin';
  return 'other';
}

/** Remembers the error code an answer carried, for the metrics (set by `sendError`). */
export const noteErrorCode = (res: Response, code: string): void => {
  res.locals.errorCode = code;
};

/** Counts and times every request once its answer ends (or the client goes away). */
export function httpMetrics(): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    res.once('close', () => {
      // A request that reached its route names it; one refused before (or no route) is matched.
      const matched = (req.route as { path?: unknown } | undefined)?.path;
      const route =
        (typeof matched === 'string' ? BY_ROUTE.get(`${req.method} ${matched}`) : undefined) ??
        routeLabel(req.method, req.path);
      const method = req.method;
      metrics.httpRequests.inc({ route, method, status: String(res.statusCode) });
      metrics.httpDuration.observe({ route, method }, (performance.now() - started) / 1000);
      const code = res.locals.errorCode as string | undefined;
      if (code !== undefined) metrics.httpErrors.inc({ route, code });
    });
    next();
  };
}
