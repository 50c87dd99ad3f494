/**
 * Scale: per-node cost as graphs grow. Random DAGs of `json` nodes with 10, 100 and 500 nodes:
 * validation time per node (`validateGraph`, median of repetitions) and run time per node
 * (submitted through the API, awaited through `/wait`, median of 3 after a warm-up).
 */
import { validateGraph } from '@tetraloop/core/compile';
import { builtinTools, parseAllowHosts } from '@tetraloop/core/tools';
import { randomDag } from './support/dag.js';
import { median, startBenchStack, timedRun } from './support/stack.js';

const SIZES = [10, 100, 500];
const VALIDATE_REPS = 21;
const RUN_REPS = 3;

export interface ScaleRow {
  nodes: number;
  edges: number;
  validateMs: number;
  validateMsPerNode: number;
  runMs: number;
  runMsPerNode: number;
}

function graphOf(size: number): { nodes: Record<string, unknown>[]; edges: [string, string][] } {
  // ~2 parents per node on average, whatever the size, so edges stay under the 5,000 limit.
  const dag = randomDag(size, size, 0, 0, Math.min(0.08, 2 / size));
  return {
    nodes: dag.nodes.map((n) => ({ id: n.id, kind: 'tool', tool: 'json', args: { value: { n: n.id } } })),
    edges: dag.edges.map(([a, b]) => [a, b]),
  };
}

export async function runScale(log: (line: string) => void = console.log): Promise<{
  rows: ScaleRow[];
  settings: Record<string, unknown>;
}> {
  const tools = builtinTools({ egress: parseAllowHosts('') });
  const stack = await startBenchStack({ TETRALOOP_TOOL_CONCURRENCY: '32' });
  const rows: ScaleRow[] = [];
  try {
    for (const size of SIZES) {
      const graph = graphOf(size);
      const times: number[] = [];
      for (let i = 0; i < VALIDATE_REPS; i++) {
        const started = performance.now();
        const result = validateGraph(graph, { tools });
        times.push(performance.now() - started);
        if (!result.ok) throw new Error(`graph of ${size} rejected: ${JSON.stringify(result.issues[0])}`);
      }
      await timedRun(stack.url, { graph }); // warm-up
      const walls: number[] = [];
      for (let i = 0; i < RUN_REPS; i++) {
        const { doc, wallMs } = await timedRun(stack.url, { graph });
        if (doc.status !== 'succeeded') throw new Error(`run of ${size} nodes: ${doc.status}`);
        walls.push(wallMs);
      }
      const validateMs = median(times);
      const runMs = median(walls);
      const row: ScaleRow = {
        nodes: size,
        edges: graph.edges.length,
        validateMs: +validateMs.toFixed(3),
        validateMsPerNode: +(validateMs / size).toFixed(4),
        runMs: +runMs.toFixed(1),
        runMsPerNode: +(runMs / size).toFixed(3),
      };
      log(`  ${size} nodes: validate ${row.validateMsPerNode} ms/node, run ${row.runMsPerNode} ms/node`);
      rows.push(row);
    }
  } finally {
    await stack.close();
  }
  return {
    rows,
    settings: {
      sizes: SIZES,
      graph: 'randomDag(seed = size, edge probability min(0.08, 2/size)) of json nodes',
      validateRepetitions: VALIDATE_REPS,
      runRepetitions: RUN_REPS,
      toolConcurrency: 32,
    },
  };
}

export function scaleTable(rows: readonly ScaleRow[]): string {
  return [
    '| nodes | edges | validate ms | validate ms/node | run ms | run ms/node |',
    '|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.nodes} | ${r.edges} | ${r.validateMs} | ${r.validateMsPerNode} | ${r.runMs} | ${r.runMsPerNode} |`,
    ),
  ].join('\n');
}
