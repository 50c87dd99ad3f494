import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['libs/**/*.test.ts', 'apps/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: more parallel files only fight over CPU and blur timing-structure checks.
    maxWorkers: 2,
    outputFile: { junit: 'test-output/junit.xml' },
  },
});
