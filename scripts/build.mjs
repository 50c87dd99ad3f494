#!/usr/bin/env node
/**
 * `npm run build`: each workspace package's `src/` as JavaScript in its `dist/`, file for file, so
 * plain Node runs the packages and the `tetraloop` command without tsx.
 * - JavaScript: esbuild transpiles each module on its own (no bundling, ES modules, the `./x.js`
 *   import specifiers kept); the other files of `src/` (the Lua scripts) are copied beside them.
 * - Type declarations, for the packages whose `exports` name a `types` condition (the ones other
 *   projects import): the TypeScript compiler emits `.d.ts` files beside the JavaScript. This is
 *   most of the build's time: the compiler checks the types it writes out.
 * Tests (`*.test.ts`) are not built. The last file written is `apps/cli/dist/build.json`, the
 * build's start time: the `tetraloop` bin runs `dist/` only when no source is newer.
 *
 * Flags: `--no-types` builds the JavaScript alone. `--out-dir <dir>` leaves the checkout as it is
 * and stages the packages as they ship instead: `<dir>/<package>/` holds the package's
 * package.json, its `dist/` and the other entries of its `files` (the bin, the console's browser
 * code), and no sources; `<dir>/node_modules/@tetraloop/<name>` links to each, as npm links the
 * workspace. The staged tree runs where the third-party packages resolve from a node_modules above
 * it (the checkout's, for a directory inside it) or from the image's (the Docker image is this).
 */
import {
  copyFileSync,
  cpSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { values: flags } = parseArgs({
  options: { 'no-types': { type: 'boolean', default: false }, 'out-dir': { type: 'string' } },
});
const OUT = flags['out-dir'] ? resolve(flags['out-dir']) : ROOT;
const startedAt = Date.now();

/** @type {{ workspaces: string[] }} */
const { workspaces } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

/** Every file below `dir`, as paths relative to it. */
function filesUnder(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
}

/** `<out-dir>/<workspace>/` afresh: the package's manifest and its `files` but `dist/`, built below. */
function stage(workspace, manifest) {
  const to = join(OUT, workspace);
  rmSync(to, { recursive: true, force: true });
  mkdirSync(to, { recursive: true });
  copyFileSync(join(ROOT, workspace, 'package.json'), join(to, 'package.json'));
  for (const entry of manifest.files ?? []) {
    if (entry !== 'dist') cpSync(join(ROOT, workspace, entry), join(to, entry), { recursive: true });
  }
  const link = join(OUT, 'node_modules', manifest.name);
  mkdirSync(dirname(link), { recursive: true });
  rmSync(link, { force: true });
  symlinkSync(relative(dirname(link), to), link);
}

/** Whether a package's `exports` give type declarations to the projects that import it. */
function declaresTypes(manifest) {
  return Object.values(manifest.exports ?? {}).some(
    (target) => typeof target === 'object' && 'types' in target,
  );
}

const entryPoints = [];
/** The sources of the packages that get declarations, and where each package's `src/` goes. */
const declared = [];
const distOf = new Map();
for (const workspace of workspaces) {
  const src = join(ROOT, workspace, 'src');
  const dist = join(OUT, workspace, 'dist');
  const manifest = JSON.parse(readFileSync(join(ROOT, workspace, 'package.json'), 'utf8'));
  if (OUT === ROOT) rmSync(dist, { recursive: true, force: true });
  else stage(workspace, manifest);
  mkdirSync(dist, { recursive: true });
  distOf.set(src, dist);
  const types = !flags['no-types'] && declaresTypes(manifest);
  for (const file of filesUnder(src)) {
    if (file.endsWith('.test.ts')) continue;
    if (file.endsWith('.ts')) {
      entryPoints.push({ in: join(src, file), out: join(dist, file.slice(0, -'.ts'.length)) });
      if (types) declared.push(join(src, file));
    } else {
      mkdirSync(dirname(join(dist, file)), { recursive: true });
      copyFileSync(join(src, file), join(dist, file));
    }
  }
}

await build({
  entryPoints,
  outdir: OUT,
  bundle: false,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  tsconfig: join(ROOT, 'tsconfig.json'),
  logLevel: 'warning',
});
await bundleCommand();
const jsDone = Date.now();

// The compiler loads only for declarations: `--no-types` runs on production dependencies alone.
const ts = declared.length > 0 ? (await import('typescript')).default : undefined;
if (ts) {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => fail([d]) },
  );
  const program = ts.createProgram({
    rootNames: declared,
    options: { ...config.options, noEmit: false, declaration: true, emitDeclarationOnly: true },
  });
  // `<package>/src/x.d.ts` is written as `<package>/dist/x.d.ts`.
  const { diagnostics } = program.emit(undefined, (fileName, text) => {
    const src = [...distOf.keys()].find((dir) => !relative(dir, fileName).startsWith('..'));
    if (!src) return;
    const out = join(distOf.get(src), relative(src, fileName));
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, text);
  });
  if (diagnostics.length > 0) fail(diagnostics);
}

writeFileSync(join(OUT, 'apps/cli/dist/build.json'), `${JSON.stringify({ startedAt })}\n`);
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
process.stdout.write(
  `built ${workspaces.length} packages (${entryPoints.length} modules) in ${seconds(Date.now() - startedAt)}: ` +
    `JavaScript ${seconds(jsDone - startedAt)}` +
    (declared.length > 0 ? `, type declarations ${seconds(Date.now() - jsDone)}\n` : '\n'),
);

/**
 * The `tetraloop` command as one bundle, `apps/cli/dist/bundle/`: the CLI, the API, the workers,
 * the core and their third-party dependencies, bundled from the sources by esbuild, so a process
 * starts without resolving, reading and linking some 700 modules one at a time (its cold start
 * falls from ~1.3 s to ~0.6 s; KEDA's scaling from zero waits on it). Each command's code is a
 * chunk of its own, loaded when the command runs. The bin runs the bundle, except with OpenTelemetry
 * tracing on: its instrumentations hook `ioredis` as a module, which a bundle does not have, so
 * that process runs the per-module `dist/` above. Left outside the bundle, loaded from
 * node_modules: what reads files beside its own module (the console's browser code, Bull Board's
 * UI) and what only tracing or development loads. The Lua scripts are copied beside the chunks,
 * where the code that reads them looks.
 */
async function bundleCommand() {
  const out = join(OUT, 'apps/cli/dist/bundle');
  rmSync(out, { recursive: true, force: true });
  await build({
    entryPoints: { main: join(ROOT, 'apps/cli/src/main.ts') },
    outdir: out,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    conditions: ['tetraloop-source'],
    external: [
      '@tetraloop/console',
      '@bull-board/*',
      '@opentelemetry/*',
      'esbuild',
      'tsx',
      'typescript',
      'testcontainers',
    ],
    // Bundled CommonJS modules `require` Node's built-ins; an ES module has no `require` of its own.
    banner: {
      js: "import { createRequire as __tetraloopRequire } from 'node:module';\nconst require = __tetraloopRequire(import.meta.url);",
    },
    tsconfig: join(ROOT, 'tsconfig.json'),
    logLevel: 'warning',
  });
  const state = join(ROOT, 'libs/core/src/state');
  for (const entry of readdirSync(state, { withFileTypes: true })) {
    if (entry.isDirectory() && entry.name.startsWith('lua')) {
      cpSync(join(state, entry.name), join(out, entry.name), { recursive: true });
    }
  }
}

/** Prints the compiler's diagnostics and stops the build. */
function fail(diagnostics) {
  process.stderr.write(
    ts.formatDiagnosticsWithColorAndContext(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => ROOT,
      getNewLine: () => '\n',
    }),
  );
  process.exit(1);
}
