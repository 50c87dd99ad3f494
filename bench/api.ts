/**
 * API: autocannon against `POST /v1/runs` (accept only, no worker consumes) and
 * `GET /v1/runs/:id` of one existing run, beside a bare Express 5 handler doing the same zod parse
 * of the body (`RunRequest.safeParse`) and answering 202. The targets take turns for three
 * rounds; each figure is the median of its rounds and the accept ratio the median of the
 * per-round ratios.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import autocannon from 'autocannon';
import express from 'express';
import { RunRequest } from '@tetraloop/core/runs';
import { profileRedis, profileTable, type ProfileRow } from './support/redis-profile.js';
import { median, startBenchStack } from './support/stack.js';

const DURATION_S = 3;
/** Targets take turns, round after round, so drift on a shared machine hits them alike. */
const ROUNDS = 3;
const CONNECTIONS = 20;
/** Accepts made one at a time under MONITOR, apart from the measured ones: the commands per accept. */
const PROFILE_ACCEPTS = 200;
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

async function cannon(
  target: string,
  url: string,
  method: 'GET' | 'POST',
  durationSeconds = DURATION_S,
): Promise<ApiRow> {
  const result = await autocannon({
    url,
    method,
    connections: CONNECTIONS,
    duration: durationSeconds,
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

export interface ApiOptions {
  durationSeconds: number;
  rounds: number;
  /** Also measure GET /v1/runs/:id. */
  read: boolean;
  /** Also count an accept's Redis commands under MONITOR. */
  profile: boolean;
}

export async function runApi(
  log: (line: string) => void = console.log,
  { durationSeconds, rounds: roundCount, read, profile: withProfile }: ApiOptions = {
    durationSeconds: DURATION_S,
    rounds: ROUNDS,
    read: true,
    profile: true,
  },
): Promise<{
  rows: ApiRow[];
  /** The median of `perRoundAcceptRatios`. */
  acceptRatio: number;
  /** Tetraloop accept ÷ bare Express in each round. */
  perRoundAcceptRatios: number[];
  /** Redis commands per accept, by what sent them (empty when not asked for). */
  profile: ProfileRow[];
  settings: Record<string, unknown>;
}> {
  const stack = await startBenchStack({}, { pools: [] });
  const bare = await startBare();
  const rows: ApiRow[] = [];
  const ratios: number[] = [];
  let profile: ProfileRow[] = [];
  try {
    const res = await fetch(`${stack.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: BODY,
    });
    const { runId } = (await res.json()) as { runId: string };
    const accept = ['Tetraloop POST /v1/runs (accept)', `${stack.url}/v1/runs`, 'POST'] as const;
    const bareAccept = [
      'bare Express 5 POST (RunRequest.safeParse → 202)',
      `${bare.url}/v1/runs`,
      'POST',
    ] as const;
    const targets = [
      accept,
      ...(read ? [['Tetraloop GET /v1/runs/:id', `${stack.url}/v1/runs/${runId}`, 'GET'] as const] : []),
      bareAccept,
    ];
    // Warm-up: every handler compiled before anything is measured.
    for (const [target, url, method] of targets) await cannon(target, url, method, 1);
    const rounds: ApiRow[][] = [];
    for (let round = 0; round < roundCount; round++) {
      const results: ApiRow[] = [];
      for (const [target, url, method] of targets) {
        const row = await cannon(target, url, method, durationSeconds);
        log(
          `  round ${round + 1} ${target}: ${row.requestsPerSecond} req/s, p99 ${row.p99Ms} ms, non-2xx ${row.non2xx}`,
        );
        results.push(row);
      }
      rounds.push(results);
    }
    targets.forEach(([target], i) => {
      const of = rounds.map((r) => r[i]!);
      rows.push({
        target,
        requestsPerSecond: Math.round(median(of.map((r) => r.requestsPerSecond))),
        p99Ms: median(of.map((r) => r.p99Ms)),
        requests: of.reduce((sum, r) => sum + r.requests, 0),
        non2xx: of.reduce((sum, r) => sum + r.non2xx, 0),
        errors: of.reduce((sum, r) => sum + r.errors, 0),
      });
    });
    const acceptAt = targets.indexOf(accept);
    const bareAt = targets.indexOf(bareAccept);
    ratios.push(...rounds.map((r) => r[acceptAt]!.requestsPerSecond / r[bareAt]!.requestsPerSecond));
    if (withProfile)
      ({ rows: profile } = await profileRedis(stack.env.REDIS_URL!, PROFILE_ACCEPTS, async () => {
        for (let i = 0; i < PROFILE_ACCEPTS; i++) {
          const accepted = await fetch(`${stack.url}/v1/runs`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: BODY,
          });
          if (accepted.status !== 202) throw new Error(`accept answered ${accepted.status}`);
          await accepted.arrayBuffer();
        }
      }));
  } finally {
    await new Promise((r) => bare.server.close(r));
    await stack.close();
  }
  const acceptRatio = +median(ratios).toFixed(3);
  return {
    rows,
    acceptRatio,
    perRoundAcceptRatios: ratios.map((r) => +r.toFixed(3)),
    profile,
    settings: {
      durationSeconds,
      rounds: roundCount,
      connections: CONNECTIONS,
      body: JSON.parse(BODY) as unknown,
    },
  };
}

export function apiTable(result: {
  rows: readonly ApiRow[];
  acceptRatio: number;
  profile: readonly ProfileRow[];
}): string {
  return [
    `Medians of ${ROUNDS} rounds of ${DURATION_S} s each (${CONNECTIONS} connections), the targets taking turns.`,
    '',
    '| target | requests/s | p99 ms | requests | non-2xx | errors |',
    '|---|---:|---:|---:|---:|---:|',
    ...result.rows.map(
      (r) =>
        `| ${r.target} | ${r.requestsPerSecond} | ${r.p99Ms} | ${r.requests} | ${r.non2xx} | ${r.errors} |`,
    ),
    '',
    `Tetraloop accept ÷ bare Express, median of the per-round ratios: **${result.acceptRatio}** (target ≥ 0.6, issue 30)`,
    '',
    `Where an accept's Redis commands go: ${PROFILE_ACCEPTS} accepts one at a time under MONITOR, apart from the measured ones.`,
    '',
    profileTable(result.profile, 'accept'),
  ].join('\n');
}
