/**
 * A worker process's small HTTP port: /metrics (Prometheus), /healthz (the process is up) and
 * /readyz (Redis reachable and the workers running). Kubernetes probes and Prometheus use it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { metricsText } from '@tetraloop/core/telemetry';

export interface HealthServer {
  readonly port: number;
  readonly close: () => Promise<void>;
}

export async function startHealthServer(port: number, ready: () => Promise<boolean>): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/metrics') {
        const { contentType, body } = await metricsText();
        res.writeHead(200, { 'content-type': contentType }).end(body);
      } else if (path === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      } else if (path === '/readyz') {
        const ok = await ready().catch(() => false);
        res
          .writeHead(ok ? 200 : 503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ status: ok ? 'ready' : 'unavailable' }));
      } else {
        res.writeHead(404).end();
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '0.0.0.0', resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
