/**
 * The API reference page in a real browser (headless Debian Chromium driven by playwright-core):
 * `/docs` renders the OpenAPI document with Redoc — the operations of the route table appear — and
 * every request the page makes stays on the API's own origin: no CDN, no fonts, no telemetry (the
 * one outside URL Redoc's bundle holds, its logo, is refused by the page's Content-Security-Policy).
 */
import { mkdirSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DOCS_PATH } from '@tetraloop/api';
import { startStack, type Stack } from '../support/stack.js';

const CHROMIUM = '/usr/bin/chromium';
let stack: Stack;
let browser: Browser;

beforeAll(async () => {
  stack = await startStack({ pools: [], env: { TETRALOOP_AUTH: 'required' } });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

it('renders the operations from the API alone', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const requested: string[] = [];
  /** Requests that failed, and why (the CSP refuses anything outside the origin before it goes out). */
  const failed = new Map<string, string>();
  page.on('request', (request) => requested.push(request.url()));
  page.on('requestfailed', (request) => failed.set(request.url(), request.failure()?.errorText ?? ''));
  await page.goto(`${stack.url}${DOCS_PATH}`);
  await page.getByRole('heading', { name: 'Submit a run' }).waitFor({ timeout: 20_000 });
  await page.getByRole('heading', { name: 'Deliver a signed webhook event' }).waitFor();
  const elsewhere = requested.filter(
    (url) => !url.startsWith(`${stack.url}/`) && !url.startsWith('blob:') && !url.startsWith('data:'),
  );
  // Redoc's sidebar footer shows its logo from its CDN, the one outside URL in its bundle: the
  // page's Content-Security-Policy refuses it in the browser, before any connection.
  expect(elsewhere).toEqual(['https://cdn.redoc.ly/redoc/logo-mini.svg']);
  for (const url of elsewhere) expect(failed.get(url), url).toBe('csp');
  expect(requested).toContain(`${stack.url}/openapi.json`);
  mkdirSync('test-output', { recursive: true });
  await page.screenshot({ path: 'test-output/api-reference.png' });
  await context.close();
});
