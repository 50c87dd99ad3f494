// Lint rules chosen for an async, distributed codebase: floating promises and
// promise misuse are bugs here, packages talk through their public entry only, no
// module imports itself back through others, and the core's layers point down.
import js from '@eslint/js';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const core = './libs/core/src';
/**
 * The core's folders from the bottom up, and what each may not import: a folder imports only
 * folders below it (see docs/architecture.md). Type-only imports are checked too.
 */
const ABOVE = {
  errors: [
    'domain',
    'graph',
    'nodes',
    'compile',
    'state',
    'queues',
    'planning',
    'executor',
    'runs',
    'sessions',
    'runtime',
  ],
  graph: [
    'model',
    'tools',
    'policy',
    'nodes',
    'compile',
    'state',
    'queues',
    'planning',
    'executor',
    'runs',
    'sessions',
    'runtime',
  ],
  nodes: ['compile', 'state', 'queues', 'planning', 'executor', 'runs', 'sessions', 'runtime'],
  compile: ['state', 'queues', 'planning', 'executor', 'runs', 'sessions', 'runtime'],
  state: ['queues', 'planning', 'executor', 'runs', 'sessions', 'runtime'],
  queues: ['planning', 'executor', 'runs', 'sessions', 'runtime'],
  planning: ['executor', 'runs', 'sessions', 'runtime'],
  executor: ['runs', 'sessions', 'runtime'],
  runs: ['executor', 'sessions', 'runtime'],
  sessions: ['executor', 'runtime'],
};
const layerZones = Object.entries(ABOVE).flatMap(([folder, above]) =>
  above.map((from) => ({
    target: `${core}/${folder}`,
    from: `${core}/${from}`,
    message: `${folder}/ sits below ${from}/: layers import downwards only.`,
  })),
);

export default tseslint.config(
  { ignores: ['**/node_modules/**', '.tetraloop/**', 'bench/results/**', 'test-output/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      // Type-only imports are ignored: they vanish at run time.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-restricted-paths': ['error', { zones: layerZones }],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/only-throw-error': 'error',
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@tetraloop/*/src/*', '../../libs/*', '../../apps/*'],
              message: 'Import a package by its public entry.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
  {
    // Matchers such as expect.objectContaining are typed `any` by vitest.
    files: ['**/*.test.ts'],
    rules: { '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
);
