/**
 * A tiny "CRM" on loopback for the custom tools example: `GET /customers?email=…` answers a
 * customer, and only to a request that carries its bearer token. `crm.lookup` (tools.ts) calls it.
 *
 *   npx tsx examples/custom-tools/crm-server.ts
 *
 * CRM_PORT: where it listens on 127.0.0.1 (default 4100; 0 for any free port).
 * CRM_TOKEN: the token it wants (default `example-crm-token`): store the same value as the secret
 * CRM_TOKEN (README.md).
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const token = process.env.CRM_TOKEN ?? 'example-crm-token';
const port = Number(process.env.CRM_PORT ?? 4100);

const customers = new Map([
  ['ada@example.com', { id: 'c-1', name: 'Ada Lovelace', plan: 'pro', since: '2021-03-14' }],
  ['grace@example.com', { id: 'c-2', name: 'Grace Hopper', plan: 'free', since: '2024-12-09' }],
]);

const answer = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://crm');
  if (url.pathname !== '/customers') return answer(res, 404, { error: 'not found' });
  if (req.headers.authorization !== `Bearer ${token}`) return answer(res, 401, { error: 'bad token' });
  const customer = customers.get(url.searchParams.get('email') ?? '');
  if (!customer) return answer(res, 404, { error: 'no such customer' });
  const key = req.headers['idempotency-key'];
  console.log(`${req.method} ${url.pathname}${url.search} (Idempotency-Key ${String(key)})`);
  answer(res, 200, customer);
});

server.listen(port, '127.0.0.1', () => {
  const { port: bound } = server.address() as AddressInfo;
  console.log(`CRM listening on http://127.0.0.1:${bound}`);
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => server.close());
