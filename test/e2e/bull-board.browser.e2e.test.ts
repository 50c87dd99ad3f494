/**
 * Bull Board in a real browser: headless Debian Chromium driven by playwright-core signs in with
 * the root token on the login page, opens the board after a run, sees the four queues and the
 * run's jobs, and saves a screenshot.
 */
import { mkdirSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runToEnd, startStack, type Stack } from '../support/stack.js';

const CHROMIUM = '/usr/bin/chromium';
const TOKEN = 'browser-admin-token-0123456789-abcdef';
let stack: Stack;
let browser: Browser;

beforeAll(async () => {
  stack = await startStack({
    env: {
      TETRALOOP_ADMIN_TOKEN: TOKEN,
      TETRALOOP_JOB_COMPLETED_AGE_SECONDS: '3600',
      // Completed node jobs are removed at once by default; kept here so the board shows them.
      TETRALOOP_NODE_JOBS_KEEP_COMPLETED: '100',
      // Every node in a job of its own: a node handed off runs in its releaser's job.
      TETRALOOP_NODE_HANDOFF: '0',
    },
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

it('shows the four queues and the jobs of a run', async () => {
  const doc = await runToEnd(stack.url, {
    graph: {
      nodes: [
        { id: 'first', kind: 'tool', tool: 'json', args: { value: 1 } },
        { id: 'second', kind: 'tool', tool: 'json', args: { value: { $ref: 'first.output' } } },
      ],
      edges: [['first', 'second']],
    },
  });
  const context = await browser.newContext();
  const page = await context.newPage();
  // Not signed in: the board sends the browser to its login page.
  await page.goto(`${stack.url}/admin/queues`);
  await page.getByLabel('Root token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${stack.url}/admin/queues`);
  for (const queue of ['sense', 'plan', 'tool', 'reflect']) {
    await page.getByRole('link', { name: queue, exact: true }).first().waitFor();
  }
  await page.goto(`${stack.url}/admin/queues/queue/tool?status=completed`);
  await page.getByText(`${doc.runId}.second`).first().waitFor();
  expect(await page.getByText(`${doc.runId}.first`).count()).toBeGreaterThan(0);
  mkdirSync('test-output', { recursive: true });
  await page.screenshot({ path: 'test-output/bull-board.png', fullPage: true });
  await context.close();
});
