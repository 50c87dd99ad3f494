/**
 * `npm run bench` runs every benchmark; `npm run bench -- <name>` one of them. Each run writes
 * bench/results/<timestamp>.json and .md with the numbers, the settings and the machine. The
 * smoke gate is the exception: it writes nothing and fails the command when a figure misses its
 * floor.
 *
 * It measures Tetraloop as it ships: `npm run bench` builds the JavaScript first and runs this file
 * without the `tetraloop-source` condition, so the packages it imports are the built ones (the
 * worker processes it starts run the build's bundle). Run through that condition, the same code
 * would be measured as tsx compiles it, which also names every function it creates at run time.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { machine } from './support/stack.js';
import { criticalPathSvg, criticalPathTable, runCriticalPath } from './critical-path.js';
import { perHopTable, runPerHop } from './per-hop.js';
import { planVsLoopTable, runPlanVsLoop } from './plan-vs-loop.js';
import { runThroughput, throughputSvg, throughputTable } from './throughput.js';
import { runScale, scaleTable } from './scale.js';
import { apiTable, runApi } from './api.js';
import { memoryTable, runMemory } from './memory.js';
import { learningTable, runLearning } from './learning.js';
import { flowTable, runFlow } from './flow.js';
import { clusterTable, runCluster } from './cluster.js';
import { coldStartTable, runColdStart } from './cold-start.js';
import { customToolTable, runCustomTool } from './custom-tool.js';
import { runSmoke, smokeTable } from './smoke.js';
import { featuresTable, runFeatures } from './features.js';
import { mapTable, runMap } from './map.js';

interface Benchmark {
  readonly title: string;
  /**
   * A gate for CI: not among "every benchmark", and it writes no results file (a CI run leaves
   * nothing behind). Its `failures` make the command exit 1.
   */
  readonly gate?: boolean;
  /** `files`: extra outputs, written as bench/results/<timestamp>-<key> (e.g. a chart). */
  run(): Promise<{
    json: unknown;
    markdown: string;
    files?: Record<string, string>;
    failures?: readonly string[];
  }>;
}

const BENCHMARKS: Record<string, Benchmark> = {
  'plan-vs-loop': {
    title: 'Plan once (DAG) vs the tool-calling loop',
    async run() {
      const result = await runPlanVsLoop();
      return { json: result, markdown: planVsLoopTable(result.rows) };
    },
  },
  'critical-path': {
    title: 'Wall time vs the critical path: Tetraloop, sequential, LangGraph.js',
    async run() {
      const result = await runCriticalPath();
      return {
        json: result,
        markdown: `Tetraloop's worker pools: ${String(result.settings.pools)}.\n\n${criticalPathTable(result.rows)}`,
        files: { 'critical-path.svg': criticalPathSvg(result.rows) },
      };
    },
  },
  'per-hop': {
    title: 'Per-hop latency of a 200-node chain: Tetraloop, raw BullMQ, LangGraph.js',
    async run() {
      const result = await runPerHop();
      return { json: result, markdown: perHopTable(result) };
    },
  },
  'custom-tool': {
    title: 'Custom tool overhead: a no-op custom tool vs the built-in json node, same graph, same processes',
    async run() {
      const result = await runCustomTool();
      return { json: result, markdown: customToolTable(result) };
    },
  },
  throughput: {
    title: 'Throughput: nodes/s with 1, 2 and 4 tool-worker processes vs raw BullMQ jobs/s',
    async run() {
      const result = await runThroughput();
      return {
        json: result,
        markdown: throughputTable(result),
        files: { 'throughput.svg': throughputSvg(result.rows) },
      };
    },
  },
  map: {
    title:
      'Map nodes: 1,000 items × 20 ms and 10,000 items × 1 ms at concurrency 100, beside LangGraph.js Send',
    async run() {
      const result = await runMap();
      return { json: result, markdown: mapTable(result) };
    },
  },
  features: {
    title: 'Unused features cost nothing: Redis commands per node with each optional feature off and on',
    async run() {
      const result = await runFeatures();
      return { json: result, markdown: featuresTable(result) };
    },
  },
  scale: {
    title: 'Scale: validation and run time per node for 10-, 100- and 500-node graphs',
    async run() {
      const result = await runScale();
      return { json: result, markdown: scaleTable(result.rows) };
    },
  },
  api: {
    title: 'API: autocannon on POST /v1/runs (accept only) and GET /v1/runs/:id vs bare Express 5',
    async run() {
      const result = await runApi();
      return { json: result, markdown: apiTable(result) };
    },
  },
  memory: {
    title: 'Memory: Redis bytes per completed run and worker RSS growth over 5,000 runs',
    async run() {
      const result = await runMemory();
      return { json: result, markdown: memoryTable(result) };
    },
  },
  learning: {
    title: 'Learning: 300 seeded runs over a broken, a slow and a healthy host, reflect off vs on',
    async run() {
      const result = await runLearning();
      return { json: result, markdown: learningTable(result) };
    },
  },
  flow: {
    title:
      'Flow control: a saturated rate limit against its configured rate; per-node cost of a limit that never binds',
    async run() {
      const result = await runFlow();
      return { json: result, markdown: flowTable(result) };
    },
  },
  cluster: {
    title:
      'Redis Cluster: how the load divides over 3 masters with 1, 3 and 6 queue shards, against one redis-server',
    async run() {
      const result = await runCluster();
      return { json: result, markdown: clusterTable(result) };
    },
  },
  'cold-start': {
    title: 'Cold start: `tetraloop --help`, the API and a tool worker to ready, built JavaScript vs sources',
    async run() {
      const result = await runColdStart();
      return { json: result, markdown: coldStartTable(result) };
    },
  },
  smoke: {
    title: 'Smoke gate: small throughput, per-hop, fan-out and API ratios against their floors',
    gate: true,
    async run() {
      const result = await runSmoke();
      return { json: result, markdown: smokeTable(result), failures: result.failures };
    },
  },
};

/** What the benchmarks measure: the built packages, or the sources when run with their condition. */
const MEASURED = import.meta.resolve('@tetraloop/api').includes('/dist/')
  ? 'the built JavaScript'
  : 'the TypeScript sources through tsx (`npm run bench` measures the build)';

async function main(): Promise<void> {
  const names = process.argv.slice(2);
  const unknown = names.filter((n) => !(n in BENCHMARKS));
  if (unknown.length > 0) {
    process.stderr.write(
      `unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(BENCHMARKS).join(', ')}\n`,
    );
    process.exit(2);
  }
  const selected =
    names.length > 0 ? names : Object.keys(BENCHMARKS).filter((name) => !BENCHMARKS[name]!.gate);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const results: Record<string, unknown> = {};
  const sections: string[] = [];
  const files: Record<string, string> = {};
  const failures: string[] = [];
  process.stdout.write(`measuring ${MEASURED}\n`);
  for (const name of selected) {
    const bench = BENCHMARKS[name]!;
    process.stdout.write(`== ${name}: ${bench.title}\n`);
    const { json, markdown, files: extra, failures: missed = [] } = await bench.run();
    failures.push(...missed);
    process.stdout.write(`\n${markdown}\n\n`);
    if (bench.gate) continue;
    results[name] = json;
    Object.assign(files, extra);
    sections.push(`## ${name}: ${bench.title}\n\n${markdown}\n`);
  }
  if (sections.length > 0) await writeResults(stamp, selected, results, sections, files);
  for (const failure of failures) process.stderr.write(`${failure}\n`);
  if (failures.length > 0) process.exitCode = 1;
}

async function writeResults(
  stamp: string,
  selected: readonly string[],
  results: Record<string, unknown>,
  sections: readonly string[],
  files: Record<string, string>,
): Promise<void> {
  const env = await machine();
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  const base = new URL(`./results/${stamp}`, import.meta.url);
  writeFileSync(
    `${base.pathname}.json`,
    JSON.stringify({ ranAt: new Date().toISOString(), machine: env, code: MEASURED, results }, null, 2),
  );
  writeFileSync(
    `${base.pathname}.md`,
    `# Tetraloop benchmarks, ${new Date().toISOString()}\n\nMachine: ${JSON.stringify(env)}\nCommand: npm run bench -- ${selected.join(' ')}\nCode: ${MEASURED}\n\n${sections.join('\n')}`,
  );
  for (const [suffix, content] of Object.entries(files)) {
    writeFileSync(`${base.pathname}-${suffix}`, content);
    process.stdout.write(`wrote bench/results/${stamp}-${suffix}\n`);
  }
  process.stdout.write(`results: bench/results/${stamp}.json and .md\n`);
}

await main();
