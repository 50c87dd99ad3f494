/**
 * A raw BullMQ worker process for the throughput benchmark: processes jobs of queue `noop` that
 * do nothing. Env: REDIS_URL, BENCH_PREFIX, BENCH_CONCURRENCY. Prints `ready` once it listens.
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const connection = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
const worker = new Worker('noop', () => Promise.resolve(), {
  connection,
  prefix: process.env.BENCH_PREFIX!,
  concurrency: Number(process.env.BENCH_CONCURRENCY ?? 32),
});
await worker.waitUntilReady();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void worker.close().then(() => {
    connection.disconnect();
    process.exit(0);
  });
});
