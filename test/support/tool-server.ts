/**
 * A loopback HTTP server for tool nodes to call. Records every hit with its interval and
 * idempotency key, so tests can check structure (who ran, how often, what overlapped).
 *
 *   GET /work?node=a&ms=100        answers {node} after ms
 *   GET /status/:code?node=a       answers with that status
 *   GET /hang?node=a               never answers (until the client goes away)
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Hit {
  readonly node: string;
  readonly path: string;
  readonly idempotencyKey: string | undefined;
  readonly start: number;
  end: number | undefined;
}

export interface ToolServer {
  readonly url: string;
  readonly hits: Hit[];
  hitsOf(node: string): Hit[];
  /** Resolves once `node` has been hit `count` times. */
  hitCount(node: string, count: number): Promise<void>;
  close(): Promise<void>;
}

export async function startToolServer(): Promise<ToolServer> {
  const hits: Hit[] = [];
  const watchers = new Set<() => void>();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://x');
    const node = url.searchParams.get('node') ?? '';
    const hit: Hit = {
      node,
      path: url.pathname,
      idempotencyKey: req.headers['idempotency-key'] as string | undefined,
      start: performance.timeOrigin + performance.now(),
      end: undefined,
    };
    hits.push(hit);
    for (const w of watchers) w();
    const reply = (status: number, body: unknown): void => {
      hit.end = performance.timeOrigin + performance.now();
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (url.pathname === '/work') {
      setTimeout(
        () => reply(200, { node, ms: Number(url.searchParams.get('ms') ?? 0) }),
        Number(url.searchParams.get('ms') ?? 0),
      );
    } else if (url.pathname.startsWith('/status/')) {
      reply(Number(url.pathname.slice('/status/'.length)), { node });
    } else if (url.pathname === '/hang') {
      req.on('close', () => (hit.end = performance.timeOrigin + performance.now()));
    } else {
      reply(404, { error: 'no such path' });
    }
  };
  const server: Server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const hitsOf = (node: string): Hit[] => hits.filter((h) => h.node === node);
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
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Two closed intervals overlap. */
export const overlaps = (a: Hit, b: Hit): boolean =>
  a.start < (b.end ?? Infinity) && b.start < (a.end ?? Infinity);
