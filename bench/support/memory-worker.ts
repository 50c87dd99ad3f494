/**
 * The worker of the memory benchmark: the plan and tool pools, as `tetraloop worker` runs them,
 * in a process started with --expose-gc. On an IPC `measure` message it collects garbage and
 * answers with its RSS and V8 heap in use, so readings compare live memory, not GC timing.
 */
import { parseWorkerEnv, startPools } from '@tetraloop/workers';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc || !process.send) throw new Error('run with --expose-gc and an IPC channel');

const pools = await startPools(parseWorkerEnv(), { pools: ['plan', 'tool'] });
process.on('message', (message) => {
  if (message === 'measure') {
    gc();
    gc();
    const { rss, heapUsed } = process.memoryUsage();
    process.send!({ rss, heapUsed });
  } else if (message === 'stop') {
    void pools.close().then(() => process.exit(0));
  }
});
process.send({ ready: true });
