/**
 * Where a chain's hop goes: a 50 × 20 ms chain of `http` nodes, with each node's call (the tool
 * server's own start and end) against its attempt record, so the gap between one call's end and
 * the next call's start is split into the node's own time and the time between nodes.
 * `npx tsx --conditions=tetraloop-source bench/chain-profile.ts` (TETRALOOP_* settings from the shell apply).
 */
import { startToolServer } from '../test/support/tool-server.js';
import { chain, tetraloopGraph } from './support/dag.js';
import { median, startBenchStack, timedRun } from './support/stack.js';

const tools = await startToolServer();
const stack = await startBenchStack({ TETRALOOP_TOOL_CONCURRENCY: '32' });
const dag = chain(50, 20, 'p');
await timedRun(stack.url, { graph: tetraloopGraph(chain(3, 5, 'w'), tools.url) });
for (let round = 0; round < 3; round++) {
  const { doc, wallMs } = await timedRun(stack.url, { graph: tetraloopGraph(dag, tools.url) });
  const calls = dag.nodes.map((n) => tools.hitsOf(n.id).at(-1)!);
  const between: number[] = [];
  const serverMs: number[] = [];
  for (let i = 0; i < calls.length; i++) {
    serverMs.push(calls[i]!.end! - calls[i]!.start);
    if (i > 0) between.push(calls[i]!.start - calls[i - 1]!.end!);
  }
  const attempt = (id: string) => doc.nodes[id]!.attempts.at(-1)!;
  const nodeOverhead = dag.nodes.map((n, i) => attempt(n.id).durationMs - serverMs[i]!);
  console.log(
    `round ${round}: wall ${Math.round(wallMs)} ms; server call p50 ${median(serverMs).toFixed(2)} ms; ` +
      `call end → next call start p50 ${median(between).toFixed(2)} ms (sum ${Math.round(between.reduce((a, b) => a + b, 0))}); ` +
      `attempt duration − call p50 ${median(nodeOverhead).toFixed(2)} ms`,
  );
}
await stack.close();
await tools.close();
