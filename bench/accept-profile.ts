/**
 * Exploration: Redis commands per accept, and CPU per accept (this process, redis-server) beside a
 * bare Express handler, by a fixed number of autocannon requests: steadier than req/s on a noisy box.
 * It prints no requests per second: a fixed `amount` ends on autocannon's one-second ticks, so its
 * rate comes out quantized (1,000, 1,500, 2,000 … per second). `bench/api.ts`, which runs for a
 * fixed time, gives that figure.
 */
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
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
const statsRedis = new Redis(stack.env.REDIS_URL!);
/** Redis's own µs per command name (INFO commandstats; a script's includes what it ran). */
const commandUsec = async (): Promise<Map<string, { calls: number; usec: number }>> => {
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const line of (await statsRedis.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (match) stats.set(match[1]!, { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return stats;
};
const cannon = async (url: string) => {
  const stats0 = await commandUsec();
  const cpu0 = process.cpuUsage();
  const redis0 = cpuMsOf(stack.redis.pid)!;
  const r = await autocannon({
    url: `${url}/v1/runs`,
    method: 'POST',
    connections: 20,
    amount: AMOUNT,
    body: BODY,
    headers: { 'content-type': 'application/json' },
  });
  const cpu = process.cpuUsage(cpu0);
  if (r.non2xx) throw new Error(`non-2xx ${r.non2xx}`);
  const stats = [...(await commandUsec())]
    .map(([name, { calls, usec }]) => ({
      name,
      calls: (calls - (stats0.get(name)?.calls ?? 0)) / AMOUNT,
      usec: (usec - (stats0.get(name)?.usec ?? 0)) / AMOUNT,
    }))
    .filter((c) => c.calls > 0 && c.name !== 'info')
    .sort((a, b) => b.usec - a.usec);
  return {
    commandstats: stats.map((c) => `${c.name} ${c.calls.toFixed(2)}× ${c.usec.toFixed(1)} µs`).join(', '),
    nodeMs: (cpu.user + cpu.system) / 1000 / AMOUNT,
    redisMs: (cpuMsOf(stack.redis.pid)! - redis0) / AMOUNT,
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
    `round ${round + 1}: tetraloop ${t.nodeMs.toFixed(3)} ms CPU/accept (redis ${t.redisMs.toFixed(3)}); bare ${b.nodeMs.toFixed(3)} ms; CPU ratio ${(b.nodeMs / t.nodeMs).toFixed(3)}`,
  );
  console.log(`  redis commandstats per accept: ${t.commandstats}`);
}
if (process.env.CPU_PROF) {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  await cannon(stack.url);
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(process.env.CPU_PROF, JSON.stringify(profile));
  // The bare handler under the same load, for a profile to subtract.
  await session.post('Profiler.start');
  await cannon(bareUrl);
  const { profile: bareProfile } = await session.post('Profiler.stop');
  writeFileSync(
    process.env.CPU_PROF.replace(/(\.cpuprofile)?$/, '.bare.cpuprofile'),
    JSON.stringify(bareProfile),
  );
}
if (process.env.ALLOC_PROF) {
  // Where an accept's garbage comes from: sampled allocations, those a GC collected included.
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await cannon(stack.url);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  writeFileSync(process.env.ALLOC_PROF, JSON.stringify(profile));
}
bare.close();
statsRedis.disconnect();
await stack.close();
process.exit(0);
