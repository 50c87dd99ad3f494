// Lint rules chosen for an async, distributed codebase: floating promises and
// promise misuse are bugs here, packages talk through their public entry only, no
// module imports itself back through others, and the core's layers point down.
// (`import-x/no-cycle` skips type-only imports; `npm run cycles`, part of `npm run lint`,
// checks those too.)
import js from '@eslint/js';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const core = './libs/core/src';
/**
 * The core's folders in layers, bottom first (see docs/architecture.md): a folder imports only
 * folders of its own layer or of layers below it. Type-only imports are held to it too.
 */
const LAYERS = [
  ['errors'],
  ['graph'],
  ['domain'],
  [
    'policy',
    'model',
    'tools',
    'workspace',
    'hooks',
    'telemetry',
    'logging',
    'memory',
    'secrets',
    'ceilings',
    'flow',
    'insight',
  ],
  ['nodes'],
  ['compile'],
  ['state'],
  ['queues'],
  ['reflect'],
  ['planning'],
  ['executor'],
  ['runs'],
  ['sessions'],
  ['config', 'runtime'],
];
/** Beyond the order: the services start and wake runs through queues/, never through the executor. */
const ALSO_FORBIDDEN = { runs: ['executor'], sessions: ['executor'] };
const layerZones = LAYERS.flatMap((layer, i) =>
  layer.flatMap((folder) =>
    [...LAYERS.slice(i + 1).flat(), ...(ALSO_FORBIDDEN[folder] ?? [])].map((from) => ({
      target: `${core}/${folder}`,
      from: `${core}/${from}`,
      message: `${folder}/ may not import ${from}/: layers import downwards only.`,
    })),
  ),
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
      // Cycles of value imports; `npm run cycles` (madge) also finds type-only ones.
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
