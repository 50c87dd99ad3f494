#!/usr/bin/env node
// Entry point of the `tetraloop` command. It runs the built JavaScript (`npm run build`: the
// bundle in dist/bundle/, or the per-module dist/ when tracing is on) when the build is there and
// no source is newer than the build's start, so nothing is compiled at start; otherwise (a fresh clone, a source edited since the build, or a process started with
// the `tetraloop-source` condition) it runs the TypeScript sources through tsx, which compiles
// them as they load. A stale build never runs. Checking costs a stat of each source (~10 ms).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { register } from 'node:module';

const SOURCE_CONDITION = 'tetraloop-source';

/** The build's start time (ms), or undefined when there is no build. */
function builtAt() {
  try {
    const { startedAt } = JSON.parse(readFileSync(new URL('../dist/build.json', import.meta.url), 'utf8'));
    return typeof startedAt === 'number' ? startedAt : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a file of the packages' sources (libs/*\/src, apps/*\/src; tests aside) is newer than `time`. */
function sourcesNewerThan(time) {
  const root = new URL('../../../', import.meta.url);
  const entries = (dir, options) => {
    try {
      return readdirSync(dir, options);
    } catch {
      return []; // no sources here (the Docker image holds dist/ alone)
    }
  };
  for (const group of ['libs', 'apps']) {
    for (const pkg of entries(new URL(`${group}/`, root))) {
      const src = new URL(`${group}/${pkg}/src/`, root);
      for (const entry of entries(src, { recursive: true, withFileTypes: true })) {
        if (!entry.isFile() || entry.name.endsWith('.test.ts')) continue;
        if (statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs > time) return true;
      }
    }
  }
  return false;
}

function runsBuild() {
  const flags = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].join(' ');
  if (flags.includes(SOURCE_CONDITION)) return false;
  const time = builtAt();
  return time !== undefined && !sourcesNewerThan(time);
}

/**
 * Whether OpenTelemetry traces or metrics are asked for (as `startTracing` decides). Its
 * instrumentations hook modules such as `ioredis` as they load, which the bundle does not load as
 * modules, and the bundle skips `startTracing`: such a process runs the per-module build.
 */
function tracingConfigured(env = process.env) {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  const traces =
    env.OTEL_TRACES_EXPORTER !== 'none' &&
    Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const metrics =
    env.OTEL_METRICS_EXPORTER !== 'none' &&
    Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT);
  return traces || metrics;
}

const BUNDLE = new URL('../dist/bundle/main.js', import.meta.url);
const built = runsBuild();

if (built && !tracingConfigured() && existsSync(BUNDLE)) {
  // The bundle (scripts/build.mjs): each command's code in one file, loaded without resolving a
  // module graph. Without tracing there is nothing for `startTracing` to do.
  const { main } = await import(BUNDLE.href);
  await main(process.argv.slice(2));
} else {
  let load;
  if (built) {
    load = (module) => import(`../dist/${module}.js`);
  } else {
    try {
      const tsx = await import('tsx/esm/api');
      tsx.register();
    } catch (err) {
      process.stderr.write(
        `tetraloop: no current build (run \`npm run build\`) and tsx does not load: ${err.message}\n`,
      );
      process.exit(1);
    }
    // The workspace packages resolve to their sources (their `tetraloop-source` export condition).
    register('./source-condition.mjs', import.meta.url);
    load = (module) => import(`../src/${module}.ts`);
  }
  // Tracing first (when OTEL_* variables ask for it), so its instrumentations see modules load.
  const { startTracing } = await load('tracing');
  // The command names the service; `--config <file>` may come before it.
  const args = process.argv.slice(2);
  const command = args.find((a, i) => !a.startsWith('-') && args[i - 1] !== '--config');
  await startTracing(command ?? 'cli');
  const { main } = await load('main');
  await main(process.argv.slice(2));
}
