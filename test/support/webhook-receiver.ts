/**
 * A loopback HTTP server that receives outbound webhooks: records each request (headers and the
 * raw body, exactly as sent) and answers from a script of statuses (then 200), so tests can check
 * signatures against the bytes received and count attempts.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The body exactly as received. */
  readonly raw: Buffer;
  /** When it arrived (epoch ms). */
  readonly at: number;
  /** What it was answered. */
  readonly status: number;
}

export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  readonly received: Received[];
  /** Resolves once `count` requests to `path` have arrived. */
  until(path: string, count: number): Promise<Received[]>;
  /** The next requests to `path` are answered these statuses, in order; then 200. */
  script(path: string, statuses: number[]): void;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: Received[] = [];
  const scripts = new Map<string, number[]>();
  const waiters: { path: string; count: number; resolve: (r: Received[]) => void }[] = [];
  const of = (path: string): Received[] => received.filter((r) => r.path === path);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const status = scripts.get(path)?.shift() ?? 200;
      received.push({ path, headers: req.headers, raw: Buffer.concat(chunks), at: Date.now(), status });
      res.writeHead(status, { 'content-type': 'application/json' }).end('{"ok":true}');
      for (const w of [...waiters]) {
        if (of(w.path).length >= w.count) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(of(w.path));
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    until: (path, count) =>
      of(path).length >= count
        ? Promise.resolve(of(path))
        : new Promise((resolve) => waiters.push({ path, count, resolve })),
    script: (path, statuses) => scripts.set(path, [...statuses]),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
