/**
 * A loopback HTTP server for tool nodes to call. Records every hit with its interval and
 * idempotency key, so tests can check structure (who ran, how often, what overlapped).
 *
 *   GET /work?node=a&ms=100[&bytes=2000]
 *                                  answers {node, ms[, data]} after ms; `bytes` pads the body with data
 *   GET /status/:code?node=a       answers with that status
 *   GET /hang?node=a               never answers (until the client goes away)
 *   GET /flaky?node=a&fail=2&status=503[&retryAfter=2]
 *                                  answers `status` to the first `fail` calls of that node, then 200
 *   GET /count?node=a              answers {count}: how often this node was called so far
 *   GET /auth?node=a               401 until POST /refresh was called, then 200
 *   ANY /echo?node=a               answers {node, method, query, headers, body} (what it was sent),
 *                                  with a `set-cookie` header
 *   GET /bytes?node=a&n=N[&declare=1]
 *                                  streams N bytes of a JSON string in 1 KiB chunks (chunked, no
 *                                  Content-Length unless `declare`); `hit.sent` counts what went out
 *   GET /retry-after?node=a&value=V[&status=429]
 *                                  answers `status` with `Retry-After: V`
 *   GET /redirect?node=a&to=URL    answers 302 to URL
 *   GET /gate?node=a               answers {node} once `openGate('a')` was called (at once after)
 *
 * How `/work` answers can be switched at run time, to play a host that breaks, recovers or is
 * slow: `setMode({ kind: 'status', status: 503 })`, `setMode({ kind: 'slow', delayMs })`,
 * `setMode({ kind: 'healthy' })` (the default: as asked), and `failNext(1, 503)` for a one-off.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Hit {
  readonly node: string;
  readonly path: string;
  readonly idempotencyKey: string | undefined;
  /** The request's headers, as received (lower-case names). */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly start: number;
  end: number | undefined;
  /** The status it was answered with (undefined while unanswered, or for a call never answered). */
  status?: number;
  /** `/bytes`: body bytes written before the client went away or the body ended. */
  sent?: number;
}

/** How `/work` answers. */
export type WorkMode =
  /** After `ms`, 200 (the default). */
  | { readonly kind: 'healthy' }
  /** At once, with this status. */
  | { readonly kind: 'status'; readonly status: number }
  /** After `delayMs(node)` instead of `ms`, 200. */
  | { readonly kind: 'slow'; readonly delayMs: (node: string) => number };

export interface ToolServer {
  readonly url: string;
  readonly hits: Hit[];
  hitsOf(node: string): Hit[];
  /** Resolves once `node` has been hit `count` times. */
  hitCount(node: string, count: number): Promise<void>;
  /** Switches how `/work` answers from the next call on. */
  setMode(mode: WorkMode): void;
  /** The next `count` calls of `/work` answer `status` at once, whatever the mode; then the mode resumes. */
  failNext(count: number, status: number): void;
  /** Answers the calls of `/gate` for `node` held so far, and those to come at once. */
  openGate(node: string): void;
  close(): Promise<void>;
}

export async function startToolServer(): Promise<ToolServer> {
  const hits: Hit[] = [];
  let refreshed = false;
  let mode: WorkMode = { kind: 'healthy' };
  let failing: { count: number; status: number } = { count: 0, status: 503 };
  const hitsOf = (node: string): Hit[] => hits.filter((h) => h.node === node);
  const watchers = new Set<() => void>();
  const opened = new Set<string>();
  const held = new Map<string, (() => void)[]>();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://x');
    const node = url.searchParams.get('node') ?? '';
    const hit: Hit = {
      node,
      path: url.pathname,
      idempotencyKey: req.headers['idempotency-key'] as string | undefined,
      headers: { ...req.headers },
      start: performance.timeOrigin + performance.now(),
      end: undefined,
    };
    hits.push(hit);
    for (const w of watchers) w();
    const reply = (status: number, body: unknown): void => {
      hit.end = performance.timeOrigin + performance.now();
      hit.status = status;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (url.pathname === '/work' && failing.count > 0) {
      failing.count -= 1;
      reply(failing.status, { node });
    } else if (url.pathname === '/work' && mode.kind === 'status') {
      reply(mode.status, { node });
    } else if (url.pathname === '/work') {
      const ms = mode.kind === 'slow' ? mode.delayMs(node) : Number(url.searchParams.get('ms') ?? 0);
      const bytes = Number(url.searchParams.get('bytes') ?? 0);
      const body = { node, ms, ...(bytes > 0 ? { data: filler(node, bytes) } : {}) };
      setTimeout(() => reply(200, body), ms);
    } else if (url.pathname.startsWith('/status/')) {
      reply(Number(url.pathname.slice('/status/'.length)), { node });
    } else if (url.pathname === '/flaky') {
      const calls = hitsOf(node).length;
      const fail = Number(url.searchParams.get('fail') ?? 0);
      const retryAfter = url.searchParams.get('retryAfter');
      if (calls <= fail) {
        if (retryAfter !== null) res.setHeader('retry-after', retryAfter);
        reply(Number(url.searchParams.get('status') ?? 503), { node, calls });
      } else {
        reply(200, { node, calls });
      }
    } else if (url.pathname === '/count') {
      reply(200, { node, count: hitsOf(node).length });
    } else if (url.pathname === '/auth') {
      reply(refreshed ? 200 : 401, { node, refreshed });
    } else if (url.pathname === '/refresh') {
      refreshed = true;
      reply(200, { refreshed });
    } else if (url.pathname === '/echo') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.setHeader('set-cookie', ['sid=s3ss10n-c00kie; HttpOnly', 'theme=dark']);
        reply(200, {
          node,
          method: req.method,
          query: Object.fromEntries(url.searchParams),
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        });
      });
    } else if (url.pathname === '/bytes') {
      streamBytes(res, hit, Number(url.searchParams.get('n') ?? 0), url.searchParams.has('declare'));
    } else if (url.pathname === '/retry-after') {
      res.setHeader('retry-after', url.searchParams.get('value') ?? '1');
      reply(Number(url.searchParams.get('status') ?? 429), { node });
    } else if (url.pathname === '/redirect') {
      hit.end = performance.timeOrigin + performance.now();
      hit.status = 302;
      res.writeHead(302, { location: url.searchParams.get('to') ?? '/' }).end();
    } else if (url.pathname === '/gate') {
      if (opened.has(node)) reply(200, { node });
      else held.set(node, [...(held.get(node) ?? []), () => reply(200, { node })]);
    } else if (url.pathname === '/hang') {
      req.on('close', () => (hit.end = performance.timeOrigin + performance.now()));
    } else {
      reply(404, { error: 'no such path' });
    }
  };
  const server: Server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    hitsOf,
    hitCount(node, count) {
      return new Promise((resolve) => {
        const check = (): void => {
          if (hitsOf(node).length >= count) {
            watchers.delete(check);
            resolve();
          }
        };
        watchers.add(check);
        check();
      });
    },
    setMode(next) {
      mode = next;
    },
    failNext(count, status) {
      failing = { count, status };
    },
    openGate(node) {
      opened.add(node);
      for (const answer of held.get(node) ?? []) answer();
      held.delete(node);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Writes `n` bytes as one JSON string (`"xxx…"`) in 1 KiB chunks, each after the last one
 * drained, stopping when the client goes away; `hit.sent` counts the bytes written.
 */
function streamBytes(res: ServerResponse, hit: Hit, n: number, declare: boolean): void {
  res.writeHead(200, {
    'content-type': 'application/json',
    ...(declare ? { 'content-length': String(n) } : {}),
  });
  hit.sent = 0;
  let gone = false;
  res.on('close', () => {
    gone = true;
    hit.end ??= performance.timeOrigin + performance.now();
  });
  const write = (): void => {
    while (!gone && hit.sent! < n) {
      const size = Math.min(1024, n - hit.sent!);
      const first = hit.sent === 0;
      const last = hit.sent! + size === n;
      const chunk = 'x'.repeat(size).split('');
      if (first) chunk[0] = '"';
      if (last) chunk[size - 1] = '"';
      hit.sent! += size;
      if (!res.write(chunk.join(''))) return void res.once('drain', write);
    }
    if (!gone) {
      hit.status = 200;
      hit.end = performance.timeOrigin + performance.now();
      res.end();
    }
  };
  write();
}

/** Deterministic text of `bytes` characters, like a page of records. */
function filler(seed: string, bytes: number): string {
  const words = ['revenue', 'region', 'quarter', 'units', 'growth', 'margin', 'churn', 'review'];
  let out = '';
  for (let i = 0; out.length < bytes; i++)
    out += `${words[(i + seed.length) % words.length]}=${(i * 37) % 1000} `;
  return out.slice(0, bytes);
}

/** Two closed intervals overlap. */
export const overlaps = (a: Hit, b: Hit): boolean =>
  a.start < (b.end ?? Infinity) && b.start < (a.end ?? Infinity);

/** The most calls in flight at once among `hits` (back-to-back calls do not overlap). */
export function maxOverlap(hits: readonly Hit[]): number {
  const edges = hits.flatMap((h) => [
    { t: h.start, d: 1 },
    { t: h.end ?? Infinity, d: -1 },
  ]);
  // Ends before starts at the same instant.
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let most = 0;
  for (const e of edges) most = Math.max(most, (now += e.d));
  return most;
}
