/**
 * API: autocannon against `POST /v1/runs` (accept only, no worker consumes) and
 * `GET /v1/runs/:id` of one existing run, beside a bare Express 5 handler doing the same zod parse
 * of the body (`RunRequest.safeParse`) and answering 202.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import autocannon from 'autocannon';
import express from 'express';
import { RunRequest } from '@tetraloop/core';
import { startBenchStack } from './support/stack.js';

const DURATION_S = 5;
const CONNECTIONS = 20;
const BODY = JSON.stringify({
  graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
});

export interface ApiRow {
  target: string;
  requestsPerSecond: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
}

async function cannon(target: string, url: string, method: 'GET' | 'POST'): Promise<ApiRow> {
  const result = await autocannon({
    url,
    method,
    connections: CONNECTIONS,
    duration: DURATION_S,
    ...(method === 'POST' ? { body: BODY, headers: { 'content-type': 'application/json' } } : {}),
  });
  return {
    target,
    requestsPerSecond: Math.round(result.requests.average),
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function startBare(): Promise<{ url: string; server: Server }> {
  const app = express();
  app.use(express.json({ strict: false }));
  app.post('/v1/runs', (req, res) => {
    const parsed = RunRequest.safeParse(req.body);
    if (!parsed.success) {
      res.status(400).json({ error: 'bad request' });
      return;
    }
    res.status(202).json({ runId: 'bare' });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

export async function runApi(log: (line: string) => void = console.log): Promise<{
  rows: ApiRow[];
  acceptRatio: number;
  settings: Record<string, unknown>;
}> {
  const stack = await startBenchStack({}, { pools: [] });
  const bare = await startBare();
  const rows: ApiRow[] = [];
  try {
    const res = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: BODY,
    });
    const { runId } = (await res.json()) as { runId: string };
    for (const [target, url, method] of [
      ['Tetraloop POST /v1/runs (accept)', `${stack.url}/v1/runs`, 'POST'],
      ['Tetraloop GET /v1/runs/:id', `${stack.url}/v1/runs/${runId}`, 'GET'],
      ['bare Express 5 POST (RunRequest.safeParse → 202)', `${bare.url}/v1/runs`, 'POST'],
    ] as const) {
      const row = await cannon(target, url, method);
      log(`  ${target}: ${row.requestsPerSecond} req/s, p99 ${row.p99Ms} ms, non-2xx ${row.non2xx}`);
      rows.push(row);
    }
  } finally {
    await new Promise((r) => bare.server.close(r));
    await stack.close();
  }
  const acceptRatio = +(rows[0]!.requestsPerSecond / rows[2]!.requestsPerSecond).toFixed(3);
  return {
    rows,
    acceptRatio,
    settings: { durationSeconds: DURATION_S, connections: CONNECTIONS, body: JSON.parse(BODY) as unknown },
  };
}

export function apiTable(result: { rows: readonly ApiRow[]; acceptRatio: number }): string {
  return [
    '| target | requests/s | p99 ms | requests | non-2xx | errors |',
    '|---|---:|---:|---:|---:|---:|',
    ...result.rows.map(
      (r) =>
        `| ${r.target} | ${r.requestsPerSecond} | ${r.p99Ms} | ${r.requests} | ${r.non2xx} | ${r.errors} |`,
    ),
    '',
    `Tetraloop accept ÷ bare Express: **${result.acceptRatio}** (target ≥ 0.5)`,
  ].join('\n');
}
