/**
 * `npm run bench` runs every benchmark; `npm run bench -- <name>` one of them. Each run writes
 * bench/results/<timestamp>.json and .md with the numbers, the settings and the machine.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { machine } from './support/stack.js';
import { planVsLoopTable, runPlanVsLoop } from './plan-vs-loop.js';

interface Benchmark {
  readonly title: string;
  run(): Promise<{ json: unknown; markdown: string }>;
}

const BENCHMARKS: Record<string, Benchmark> = {
  'plan-vs-loop': {
    title: 'Plan once (DAG) vs the tool-calling loop',
    async run() {
      const result = await runPlanVsLoop();
      return { json: result, markdown: planVsLoopTable(result.rows) };
    },
  },
};

async function main(): Promise<void> {
  const names = process.argv.slice(2);
  const unknown = names.filter((n) => !(n in BENCHMARKS));
  if (unknown.length > 0) {
    process.stderr.write(
      `unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(BENCHMARKS).join(', ')}\n`,
    );
    process.exit(2);
  }
  const selected = names.length > 0 ? names : Object.keys(BENCHMARKS);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const results: Record<string, unknown> = {};
  const sections: string[] = [];
  for (const name of selected) {
    const bench = BENCHMARKS[name]!;
    process.stdout.write(`== ${name}: ${bench.title}\n`);
    const { json, markdown } = await bench.run();
    results[name] = json;
    sections.push(`## ${name}: ${bench.title}\n\n${markdown}\n`);
    process.stdout.write(`\n${markdown}\n\n`);
  }
  const env = await machine();
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  const base = new URL(`./results/${stamp}`, import.meta.url);
  writeFileSync(
    `${base.pathname}.json`,
    JSON.stringify({ ranAt: new Date().toISOString(), machine: env, results }, null, 2),
  );
  writeFileSync(
    `${base.pathname}.md`,
    `# Tetraloop benchmarks, ${new Date().toISOString()}\n\nMachine: ${JSON.stringify(env)}\nCommand: npm run bench -- ${selected.join(' ')}\n\n${sections.join('\n')}`,
  );
  process.stdout.write(`results: bench/results/${stamp}.json and .md\n`);
}

await main();
