/**
 * The console's browser code, bundled by esbuild inside the process that serves it: the first
 * request for the script or the style sheet builds both (about 100 ms), later ones get them from
 * memory. There is no build step to forget: a fresh clone, `npm ci` and the run command serve the
 * console, and so does the Docker image (esbuild is a production dependency of this package).
 * esbuild itself loads at that first request, not at the API's start.
 */
import { fileURLToPath } from 'node:url';

export interface ConsoleAssets {
  /** The page's one script, an ES module with every dependency inside it. */
  readonly script: string;
  readonly style: string;
}

const WEB = (file: string): string => fileURLToPath(new URL(`../web/${file}`, import.meta.url));
/**
 * `@tetraloop/client` as this process has it: its TypeScript sources (the `tetraloop-source`
 * condition) when this module runs from its own (tsx, the tests), its built dist/ otherwise.
 */
const CONDITIONS = import.meta.url.endsWith('.ts') ? ['tetraloop-source'] : [];

async function bundle(): Promise<ConsoleAssets> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [WEB('main.ts'), WEB('console.css')],
    bundle: true,
    write: false,
    outdir: 'console',
    format: 'esm',
    platform: 'browser',
    conditions: CONDITIONS,
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const text = (suffix: string): string => {
    const file = result.outputFiles.find((f) => f.path.endsWith(suffix));
    if (!file) throw new Error(`the console's bundle has no ${suffix} output`);
    return file.text;
  };
  return { script: text('.js'), style: text('.css') };
}

let built: Promise<ConsoleAssets> | undefined;

/** The bundle, built once per process; a failed build is tried again at the next request. */
export function consoleAssets(): Promise<ConsoleAssets> {
  built ??= bundle().catch((err: unknown) => {
    built = undefined;
    throw err;
  });
  return built;
}
