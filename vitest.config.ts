import { defaultClientConditions, defaultServerConditions, type Plugin } from 'vite';
import { defineConfig } from 'vitest/config';

/**
 * Four test modes, one project each: `npm test` runs them all, `npm run test:<name>` one.
 * - unit: `*.test.ts` next to the code and in test/ — no Redis, no process: the global setup that
 *   starts Redis is not run for it, and it passes with `REDIS_URL=redis://127.0.0.1:1`.
 * - int: `*.int.test.ts` under test/ on the suite's Redis (the fuzz suite among them).
 * - cluster: `test/cluster/`, which starts Redis Clusters of its own.
 * - e2e: `test/e2e/`, whole `tetraloop` processes (and Chromium) on the suite's Redis.
 */
const REDIS = ['test/support/global-setup.ts'];
const E2E = 'test/e2e/**/*.test.ts';
const CLUSTER = 'test/cluster/**/*.test.ts';
/**
 * The workspace packages' TypeScript sources, not their built dist/ (no build before a test): the
 * `tetraloop-source` export condition first, in every Vite environment — the tests' (whose
 * conditions Vitest also gives its workers' Node as `--conditions`) and the global setups'.
 */
const SOURCE = 'tetraloop-source';
const sourceCondition: Plugin = {
  name: 'tetraloop-source-condition',
  configEnvironment: (_name, config) => ({
    resolve: {
      conditions: [
        SOURCE,
        ...(config.resolve?.conditions ??
          (config.consumer === 'client' ? defaultClientConditions : defaultServerConditions)),
      ],
    },
  }),
};

export default defineConfig({
  plugins: [sourceCondition],
  test: {
    exclude: ['**/node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: more parallel files only fight over CPU and blur timing-structure checks.
    maxWorkers: 2,
    outputFile: { junit: 'test-output/junit.xml' },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          // Pure tests that share no state: each worker loads the packages once for all its files
          // instead of once per file, which is most of the run's time (170 s → 37 s on 2 busy cores).
          isolate: false,
          include: ['libs/**/*.test.ts', 'apps/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: ['**/node_modules/**', '**/*.int.test.ts', E2E, CLUSTER],
        },
      },
      {
        extends: true,
        test: {
          name: 'int',
          include: ['libs/**/*.int.test.ts', 'apps/**/*.int.test.ts', 'test/**/*.int.test.ts'],
          exclude: ['**/node_modules/**', E2E, CLUSTER],
          globalSetup: REDIS,
        },
      },
      { extends: true, test: { name: 'cluster', include: [CLUSTER] } },
      { extends: true, test: { name: 'e2e', include: [E2E], globalSetup: REDIS } },
    ],
  },
});
