/**
 * Exploration: Redis commands per accept, and CPU per accept (this process, redis-server) beside a
 * bare Express handler, by a fixed number of autocannon requests: steadier than req/s on a noisy box.
 */
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import express from 'express';
import { RunRequest } from '@tetraloop/core/runs';
import { cpuMsOf } from './support/cpu.js';
import { profileRedis, profileTable } from './support/redis-profile.js';
import { startBenchStack } from './support/stack.js';

const BODY = JSON.stringify({
  graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
});
const stack = await startBenchStack(JSON.parse(process.env.BENCH_ENV ?? '{}') as Record<string, string>, {
  pools: [],
});
const bareApp = express();
bareApp.use(express.json({ strict: false }));
bareApp.post('/v1/runs', (req, res) => {
  const parsed = RunRequest.safeParse(req.body);
  if (!parsed.success) return void res.status(400).json({ error: 'bad request' });
  res.status(202).json({ runId: 'bare' });
});
const bare = bareApp.listen(0, '127.0.0.1');
await new Promise((r) => bare.once('listening', r));
const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;
const post = () =>
  fetch(`${stack.url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: BODY,
  }).then(async (r) => {
    if (r.status !== 202) throw new Error(`${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  });
for (let i = 0; i < 100; i++) await post();
const N = 200;
const { rows } = await profileRedis(stack.env.REDIS_URL!, N, async () => {
  for (let i = 0; i < N; i++) await post();
});
console.log(profileTable(rows, 'accept'));
const AMOUNT = Number(process.env.AMOUNT ?? 4000);
const cannon = async (url: string) => {
  const cpu0 = process.cpuUsage();
  const redis0 = cpuMsOf(stack.redis.pid)!;
  const t0 = performance.now();
  const r = await autocannon({
    url: `${url}/v1/runs`,
    method: 'POST',
    connections: 20,
    amount: AMOUNT,
    body: BODY,
    headers: { 'content-type': 'application/json' },
  });
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (r.non2xx) throw new Error(`non-2xx ${r.non2xx}`);
  return {
    nodeMs: (cpu.user + cpu.system) / 1000 / AMOUNT,
    redisMs: (cpuMsOf(stack.redis.pid)! - redis0) / AMOUNT,
    perS: Math.round((AMOUNT / wall) * 1000),
  };
};
await cannon(stack.url);
await cannon(bareUrl);
const ratios: number[] = [];
for (let round = 0; round < Number(process.env.ROUNDS ?? 3); round++) {
  const t = await cannon(stack.url);
  const b = await cannon(bareUrl);
  ratios.push(b.nodeMs / t.nodeMs);
  console.log(
    `round ${round + 1}: tetraloop ${t.nodeMs.toFixed(3)} ms CPU/accept (redis ${t.redisMs.toFixed(3)}), ${t.perS}/s; bare ${b.nodeMs.toFixed(3)} ms, ${b.perS}/s; CPU ratio ${(b.nodeMs / t.nodeMs).toFixed(3)}, req/s ratio ${(t.perS / b.perS).toFixed(3)}`,
  );
}
if (process.env.CPU_PROF) {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  await cannon(stack.url);
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(process.env.CPU_PROF, JSON.stringify(profile));
}
bare.close();
await stack.close();
process.exit(0);
