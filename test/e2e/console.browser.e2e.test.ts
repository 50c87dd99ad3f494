/**
 * The console in a real browser (headless Debian Chromium driven by playwright-core) on a whole
 * stack with auth required: the page asks for a key once, then every view is driven through its
 * DOM and checked by the attributes it promises (`data-node-id`, `data-status` on each node,
 * `data-run-status` on the run page's root, `data-progress` on a node a custom tool's call reports
 * progress for, from a tool worker process the test starts). Nothing waits on a clock: each step
 * waits for an attribute the page sets from what the API answered. A failing test leaves a
 * screenshot of its page in `test/artifacts/`; the run page of the example graph is saved there
 * on every run (`docs/console-run.png` is a copy).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_PAGES } from '@tetraloop/console';
import { SCOPES, type RunDocument } from '@tetraloop/core/domain';
import { startModelServer, type ChatRequest, type ModelServer } from '../support/model-server.js';
import { spawnTetraloop, stderrMatches } from '../support/processes.js';
import { startStack, type Stack } from '../support/stack.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = 'console-root-token-0123456789-0123456789';
const ARTIFACTS = 'test/artifacts';
/** Each step that waits on the page: a run of a few nodes settles well within it. */
const STEP_MS = 20_000;
/** `test.progress`: reports progress, then holds its call until the tool server's gate opens. */
const PROGRESS_TOOLS = fileURLToPath(new URL('../fixtures/tools/progress-tools.ts', import.meta.url));

let stack: Stack;
let tools: ToolServer;
let model: ModelServer;
let browser: Browser;
/** A key of the tenant `acme` with every scope, made through the API with the root token. */
let key: string;

const lastUser = (r: ChatRequest): string =>
  String([...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '');

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  tools = await startToolServer();
  model = await startModelServer({ script: (r) => ({ content: `echo: ${lastUser(r)}` }) });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Outputs past 1 KiB are kept as blobs: the details panel loads them on demand.
      TETRALOOP_BLOB_MIN_BYTES: '1024',
    },
  });
  const made = await api('post', '/v1/keys', { tenant: 'acme', scopes: SCOPES }, ROOT);
  key = (made as { key: string }).key;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
  await tools?.close();
  await model?.close();
});

async function api(method: string, path: string, body?: unknown, token = key): Promise<unknown> {
  const res = await fetch(`${stack.url}${path}`, {
    method: method.toUpperCase(),
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = await res.json();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(answer)}`);
  return answer;
}

const submit = async (request: unknown): Promise<string> =>
  ((await api('post', '/v1/runs', request)) as { runId: string }).runId;
const settled = async (runId: string): Promise<RunDocument> =>
  (await api('get', `/v1/runs/${runId}/wait?timeoutMs=${STEP_MS}`)) as RunDocument;

/**
 * A fresh browser tab that has given the console its key (through the key form, as a person
 * would); `test` runs in it, and a failure leaves a screenshot named after it.
 */
async function inConsole(name: string, test: (page: Page) => Promise<void>): Promise<void> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_MS);
  // Anything the page's Content-Security-Policy refused (an inline style, a script from elsewhere).
  const refused: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) refused.push(message.text());
  });
  try {
    await page.goto(`${stack.url}/console/`);
    await page.locator('form[data-role="api-key"] input[name="key"]').fill(key);
    await page.locator('form[data-role="api-key"] button[type="submit"]').click();
    await page.locator('[data-page="runs"]').waitFor();
    await test(page);
    expect(refused).toEqual([]);
  } catch (err) {
    await page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true }).catch(() => undefined);
    throw err;
  } finally {
    await context.close();
  }
}

const runPage = (page: Page, runId: string): Promise<unknown> =>
  page.goto(`${stack.url}/console/runs/${runId}`);
const node = (page: Page, id: string) => page.locator(`[data-role="graph"] [data-node-id="${id}"]`);

describe('authentication', () => {
  it('asks for a key once, refuses a wrong one, and sends the right one as a bearer token only', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    const outside: string[] = [];
    const bearer: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(`${stack.url}/`)) outside.push(request.url());
      const authorization = request.headers().authorization;
      if (authorization) bearer.push(`${new URL(request.url()).pathname} ${authorization}`);
    });
    try {
      const shell = await page.goto(`${stack.url}/console/`);
      expect(shell!.headers()['content-security-policy']).toMatch(/default-src 'none'; script-src 'self'/);
      await page.locator('form[data-role="api-key"] input[name="key"]').fill('tl_nope_nope');
      await page.locator('form[data-role="api-key"] button[type="submit"]').click();
      await page.getByText('The API refused that key').waitFor();
      await page.locator('form[data-role="api-key"] input[name="key"]').fill(key);
      await page.locator('form[data-role="api-key"] button[type="submit"]').click();
      await page.locator('[data-page="runs"] [data-role="runs"][data-loaded="true"]').waitFor();
      // Kept for the tab: another page of the console does not ask again.
      await page.goto(`${stack.url}/console/sessions`);
      await page.locator('[data-page="sessions"]').waitFor();
      expect(await page.locator('form[data-role="api-key"]').count()).toBe(0);
      expect(page.url()).not.toContain(key);
      expect((await context.cookies()).length).toBe(0);
      expect(bearer.some((b) => b === `/v1/runs Bearer ${key}`)).toBe(true);
      expect(bearer.every((b) => b.startsWith('/v1/'))).toBe(true);
      expect(outside).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe('a run', () => {
  it('submits the example graph and follows every node to succeeded, with its critical path and timeline', async () => {
    await inConsole('example-run', async (page) => {
      const example = readFileSync('examples/parallel-fetch.json', 'utf8').replaceAll(
        'http://127.0.0.1:3000',
        stack.url,
      );
      await page.locator('details.submit summary').click();
      await page.locator('form[data-role="submit-run"] textarea').fill(example);
      await page.locator('form[data-role="submit-run"] button[type="submit"]').click();
      await page.locator('main[data-page="run"][data-run-status="succeeded"][data-settled="true"]').waitFor();
      const ids = ['health', 'ready', 'pause', 'report'];
      for (const id of ids) await node(page, id).and(page.locator('[data-status="succeeded"]')).waitFor();
      expect(await page.locator('[data-role="graph"] [data-node-id]').count()).toBe(4);
      // The graph marks the critical path the API explains (through the 500 ms pause into the
      // join, unless a loaded machine made a fetch slower), and only it.
      const runId = new URL(page.url()).pathname.split('/').pop()!;
      const explained = (await api('get', `/v1/runs/${runId}/explain`)) as { criticalPath: { id: string }[] };
      const onPath = explained.criticalPath.map((n) => n.id);
      expect(onPath).toContain('report');
      for (const id of onPath)
        await page.locator(`[data-role="graph"] [data-node-id="${id}"].critical`).waitFor();
      expect(await page.locator('[data-role="graph"] [data-node-id].critical').count()).toBe(onPath.length);
      expect(await page.locator('[data-timeline-node]').count()).toBe(4);
      await node(page, 'report').click();
      const details = page.locator('[data-role="node-details"][data-node-id="report"]');
      await details.locator('[data-role="output"]').getByText('"ok"').first().waitFor();
      // The input the run recorded on the node's snapshot: the args as the call got them, every
      // reference already filled in by the worker (the console resolves nothing itself).
      const recorded = (await settled(runId)).nodes.report as { input?: { value: { waitedMs: number } } };
      expect(recorded.input?.value).toMatchObject({ health: 'ok', redis: 'up' });
      const input = details.locator('[data-role="input"][data-recorded="true"]');
      const shown = await input.textContent();
      expect(shown).toContain(`waitedMs: ${recorded.input!.value.waitedMs}`);
      expect(shown).toContain('health: "ok"');
      expect(shown).not.toContain('$ref');
      await page.screenshot({ path: `${ARTIFACTS}/console-run.png` });
    });
  }, 60_000);

  it('shows a wait node waiting, and its Approve button completes the run', async () => {
    const runId = await submit({
      graph: {
        nodes: [
          { id: 'gate', kind: 'wait', signal: 'approve', timeoutSeconds: 600 },
          { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'gate.output' } } },
        ],
        edges: [['gate', 'after']],
      },
    });
    await inConsole('wait-approve', async (page) => {
      await runPage(page, runId);
      await node(page, 'gate').and(page.locator('[data-status="waiting"]')).waitFor();
      // A node that has not finished has no recorded input yet, and says so.
      await node(page, 'after').click();
      const pending = page.locator('[data-role="node-details"][data-node-id="after"] [data-role="input"]');
      await expect(pending.getAttribute('data-recorded')).resolves.toBe('false');
      await expect(pending.textContent()).resolves.toMatch(/^Not recorded yet/);
      const form = page.locator('form[data-role="decision"][data-node-id="gate"]');
      await form.locator('input[name="comment"]').fill('looks right');
      await form.locator('[data-action="approve"]').click();
      await page.locator('main[data-run-status="succeeded"]').waitFor();
      await node(page, 'after').and(page.locator('[data-status="succeeded"]')).waitFor();
    });
    const doc = await settled(runId);
    expect((doc.nodes.gate as { output?: unknown }).output).toEqual({
      approved: true,
      comment: 'looks right',
    });
  }, 60_000);

  it('follows the run live: a decision made elsewhere shows up from the event stream alone', async () => {
    const runId = await submit({
      graph: { nodes: [{ id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 600 }] },
    });
    await inConsole('live', async (page) => {
      await runPage(page, runId);
      await node(page, 'gate').and(page.locator('[data-status="waiting"]')).waitFor();
      // The page does nothing from here on: only the run's events can tell it what happens next.
      await api('post', `/v1/runs/${runId}/signals/go`, { by: 'someone else' });
      await node(page, 'gate').and(page.locator('[data-status="succeeded"]')).waitFor();
      await page.locator('main[data-run-status="succeeded"][data-settled="true"]').waitFor();
    });
  }, 60_000);

  it('shows a custom tool’s progress on its node while it runs, and drops it once the node is done', async () => {
    const worker = spawnTetraloop(
      ['worker', '--pool', 'tool', '--tools', PROGRESS_TOOLS, '--queues', 'progress'],
      { ...stack.env, TOOL_SERVER_URL: tools.url },
    );
    try {
      await stderrMatches(worker, /worker ready: pools tool/);
      const gate = `progress-${Date.now()}`;
      const steps = [
        { fraction: 0.2, message: 'looking up' },
        { fraction: 0.5, message: 'customer found' },
      ];
      const runId = await submit({
        graph: { nodes: [{ id: 'lookup', kind: 'tool', tool: 'test.progress', args: { steps, gate } }] },
      });
      await tools.hitCount(gate, 1);
      await inConsole('progress', async (page) => {
        await runPage(page, runId);
        // The latest report, from the run's events (the run document has none).
        const box = node(page, 'lookup').and(page.locator('[data-status="running"][data-progress="0.5"]'));
        await box.click();
        const bar = await box.locator('.progress-bar').getAttribute('width');
        const track = await box.locator('.progress-track').getAttribute('width');
        expect(Number(bar)).toBeCloseTo(Number(track) / 2);
        const shown = page.locator(
          '[data-role="node-details"][data-node-id="lookup"] [data-role="progress"]',
        );
        await expect(shown.textContent()).resolves.toBe('Progress: 50% — customer found');
        tools.openGate(gate);
        await page.locator('main[data-run-status="succeeded"][data-settled="true"]').waitFor();
        await node(page, 'lookup')
          .and(page.locator('[data-status="succeeded"]:not([data-progress])'))
          .waitFor();
        await page
          .locator('[data-role="node-details"][data-node-id="lookup"][data-status="succeeded"]')
          .waitFor();
        expect(await shown.count()).toBe(0);
      });
    } finally {
      await worker.kill('SIGTERM');
    }
  }, 60_000);

  it('shows a failed node’s error class and message in its details', async () => {
    const runId = await submit({
      graph: {
        nodes: [{ id: 'bad', kind: 'tool', tool: 'http', args: { url: `${tools.url}/status/404?node=bad` } }],
      },
    });
    const doc = await settled(runId);
    const error = (doc.nodes.bad as { error?: { code: string; message: string } }).error!;
    await inConsole('failed-node', async (page) => {
      await runPage(page, runId);
      await page.locator('main[data-run-status="failed"]').waitFor();
      await node(page, 'bad').and(page.locator('[data-status="failed"]')).click();
      const shown = page.locator('[data-role="node-details"][data-node-id="bad"] [data-role="node-error"]');
      await expect(shown.getAttribute('data-error-class')).resolves.toBe('validation');
      await expect(shown.locator('.error-class').textContent()).resolves.toBe(error.code);
      await expect(shown.locator('.error-message').textContent()).resolves.toBe(error.message);
    });
  }, 60_000);

  it('reruns from a node: the new run links to its origin, and the node upstream is not called again', async () => {
    const tag = `rerun-${Date.now()}`;
    const runId = await submit({
      tags: [tag],
      graph: {
        nodes: [
          { id: 'up', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=${tag}-up&ms=5` } },
          {
            id: 'down',
            kind: 'tool',
            tool: 'http',
            args: { url: `${tools.url}/work?node=${tag}-down&ms=5` },
          },
        ],
        edges: [['up', 'down']],
      },
    });
    expect((await settled(runId)).status).toBe('succeeded');
    await inConsole('rerun', async (page) => {
      await runPage(page, runId);
      await page.locator('main[data-run-status="succeeded"][data-settled="true"]').waitFor();
      await node(page, 'down').click();
      await page.locator('[data-role="node-details"][data-node-id="down"] [data-action="rerun"]').click();
      await page.waitForURL(
        (url) => url.pathname.startsWith('/console/runs/') && !url.pathname.endsWith(runId),
      );
      await page.locator('main[data-run-status="succeeded"][data-settled="true"]').waitFor();
      await expect(
        page.locator('[data-role="rerun-of"] a[data-role="origin"]').getAttribute('href'),
      ).resolves.toBe(`/console/runs/${runId}`);
      await node(page, 'up').and(page.locator('[data-status="succeeded"]')).waitFor();
    });
    expect(tools.hitsOf(`${tag}-up`)).toHaveLength(1);
    expect(tools.hitsOf(`${tag}-down`)).toHaveLength(2);
  }, 60_000);
});

describe('a map node', () => {
  it('shows the map as one node with a progress bar, and pages through its items on click', async () => {
    const tag = `map-${Date.now()}`;
    // Item 0 holds its lane at the gate; item 7 fails (and the map goes on); the rest are quick.
    const items = Array.from({ length: 25 }, (_, i) =>
      i === 0
        ? { url: `${tools.url}/gate?node=${tag}` }
        : i === 7
          ? { url: `${tools.url}/status/500?node=${tag}-7` }
          : { url: `${tools.url}/work?node=${tag}-${i}&ms=1` },
    );
    const runId = await submit({
      input: { items },
      graph: {
        nodes: [
          {
            id: 'fan',
            kind: 'map',
            over: { $ref: 'input.items' },
            node: { kind: 'tool', tool: 'http', args: { url: '{{item.url}}' }, retry: { server: 0 } },
            concurrency: 5,
            onItemError: 'continue',
          },
        ],
      },
    });
    await tools.hitCount(tag, 1);
    await inConsole('map', async (page) => {
      await runPage(page, runId);
      const box = node(page, 'fan');
      await box.and(page.locator('[data-status="running"][data-progress]')).click();
      // One node for the map, however many items it has.
      expect(await page.locator('[data-role="graph"] [data-node-id]').count()).toBe(1);
      const details = page.locator('[data-role="node-details"][data-node-id="fan"]');
      await details.locator('[data-role="map-progress"][data-total="25"]').waitFor();
      const rows = details.locator('[data-role="map-items"] tbody tr');
      await rows.and(page.locator('[data-item-index="0"][data-status="running"]')).waitFor();

      tools.openGate(tag);
      await page.locator('main[data-run-status="succeeded"][data-settled="true"]').waitFor();
      await box.and(page.locator('[data-status="succeeded"][data-progress="1"]')).waitFor();
      await details
        .locator('[data-role="map-progress"][data-done="25"][data-failed="1"][data-running="0"]')
        .waitFor();
      await expect(details.locator('[data-role="map-progress"]').textContent()).resolves.toBe(
        '25 of 25 done · 1 failed',
      );
      await rows.and(page.locator('[data-item-index="0"][data-status="succeeded"]')).waitFor();
      await rows.and(page.locator('[data-item-index="7"][data-status="failed"]')).waitFor();
      expect(await rows.count()).toBe(20);
      await expect(details.locator('[data-role="map-timing"]').textContent()).resolves.toMatch(
        /^25 items ran, 5 at once · items' critical path/,
      );

      await details.locator('[data-action="items-next"]').click();
      await details.locator('[data-role="map-items"][data-page="1"][data-loaded="true"]').waitFor();
      expect(await rows.count()).toBe(5);
      await rows.and(page.locator('[data-item-index="22"]')).click();
      const item = details.locator('[data-role="map-item"] [data-item-index="22"][data-status="succeeded"]');
      await item.waitFor();
      // Its output as the items route answers it (nested branches start closed).
      await expect(item.locator('[data-role="output"]').textContent()).resolves.toContain(`"${tag}-22"`);
      await page.screenshot({ path: `${ARTIFACTS}/console-map.png`, fullPage: true });

      await details.locator('[data-action="items-previous"]').click();
      await details.locator('[data-role="map-items"][data-page="0"][data-loaded="true"]').waitFor();
      await rows.and(page.locator('[data-item-index="7"]')).click();
      await details
        .locator(
          '[data-role="map-item"] [data-item-index="7"] [data-role="node-error"][data-error-class="server"]',
        )
        .waitFor();
    });
  }, 60_000);
});

describe('actions', () => {
  it('cancels a running run, sends feedback on it, and resumes a failed one', async () => {
    const waiting = await submit({
      graph: { nodes: [{ id: 'gate', kind: 'wait', signal: 'never', timeoutSeconds: 600 }] },
    });
    const node = `resume-${Date.now()}`;
    const failing = await submit({
      graph: {
        nodes: [
          { id: 'bad', kind: 'tool', tool: 'http', args: { url: `${tools.url}/status/404?node=${node}` } },
        ],
      },
      budget: { toolCalls: 10 },
    });
    expect((await settled(failing)).status).toBe('failed');
    const callsBefore = tools.hitsOf(node).length;
    await inConsole('actions', async (page) => {
      await runPage(page, waiting);
      await page.locator('[data-role="graph"] [data-node-id="gate"][data-status="waiting"]').waitFor();
      await page.locator('[data-action="cancel"]').click();
      await page.locator('main[data-run-status="cancelled"][data-settled="true"]').waitFor();
      const feedback = page.locator('form[data-role="feedback"]');
      await feedback.locator('select[name="score"]').selectOption('-1');
      await feedback.locator('input[name="comment"]').fill('stopped by hand');
      await feedback.locator('button[type="submit"]').click();
      await page.locator('[data-role="notice"]', { hasText: 'Feedback: done.' }).waitFor();

      await runPage(page, failing);
      await page.locator('main[data-run-status="failed"][data-settled="true"]').waitFor();
      await page.locator('[data-action="resume"]').click();
      await page.locator('[data-role="notice"]', { hasText: 'Resume: done.' }).waitFor();
      await tools.hitCount(node, callsBefore + 1);
    });
    expect((await settled(failing)).generation).toBe(1);
  }, 60_000);

  it('loads a blob output on demand in the details panel', async () => {
    const runId = await submit({
      graph: {
        nodes: [
          {
            id: 'big',
            kind: 'tool',
            tool: 'http',
            args: { url: `${tools.url}/work?node=blob&ms=1&bytes=4000` },
          },
        ],
      },
    });
    expect((await settled(runId)).status).toBe('succeeded');
    await inConsole('blob', async (page) => {
      await runPage(page, runId);
      await node(page, 'big').and(page.locator('[data-status="succeeded"]')).click();
      const output = page.locator('[data-role="node-details"][data-node-id="big"] [data-role="output"]');
      await output.locator('[data-blob^="sha256:"] [data-action="load-blob"]').click();
      await output.locator('.json-key', { hasText: 'body:' }).waitFor();
      expect(await output.locator('[data-action="load-blob"]').count()).toBe(0);
    });
  }, 60_000);
});

describe('the runs list', () => {
  it('filters by status (and tag) from the page', async () => {
    const tag = `list-${Date.now()}`;
    const ok = await submit({
      tags: [tag],
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
    });
    const bad = await submit({
      tags: [tag],
      graph: {
        nodes: [
          { id: 'a', kind: 'tool', tool: 'http', args: { url: `${tools.url}/status/404?node=${tag}` } },
        ],
      },
    });
    await Promise.all([settled(ok), settled(bad)]);
    await inConsole('runs-list', async (page) => {
      const filters = page.locator('form[data-role="filters"]');
      await filters.locator('input[name="tag"]').fill(tag);
      await filters.locator('button[type="submit"]').click();
      await page.locator(`tr[data-run-id="${ok}"][data-status="succeeded"]`).waitFor();
      await page.locator(`tr[data-run-id="${bad}"][data-status="failed"]`).waitFor();
      await filters.locator('select[name="status"]').selectOption('failed');
      await page.locator(`tr[data-run-id="${ok}"]`).waitFor({ state: 'detached' });
      await page.locator(`tr[data-run-id="${bad}"]`).waitFor();
      expect(new URL(page.url()).searchParams.get('status')).toBe('failed');
      expect(await page.locator('tr[data-run-id]').count()).toBe(1);
      await page.screenshot({ path: `${ARTIFACTS}/console-list.png` });
    });
  }, 60_000);
});

describe('schedules', () => {
  it('shows a paused schedule, triggers it and lists its run, resumes, pauses and deletes it', async () => {
    const tag = `schedule-${Date.now()}`;
    const { id } = (await api('post', '/v1/schedules', {
      name: tag,
      // 07:00 on 1 January in Paris: resumed, it does not fire while the test runs.
      cron: '0 7 1 1 *',
      timezone: 'Europe/Paris',
      paused: true,
      request: {
        tags: [tag],
        graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
      },
    })) as { id: string };
    await inConsole('schedules', async (page) => {
      await page.goto(`${stack.url}${CONSOLE_PAGES.schedules}`);
      const row = page.locator(`[data-role="schedules"] tr[data-schedule-id="${id}"]`);
      await row.and(page.locator('[data-paused="true"][data-last-run=""]')).waitFor();
      await expect(row.textContent()).resolves.toContain('cron 0 7 1 1 * (Europe/Paris)');
      await expect(row.locator('[data-role="next-fire"]').textContent()).resolves.toBe('—');

      await row.locator('[data-action="trigger"]').click();
      await page.locator('[data-role="notice"]', { hasText: /^Trigger now: run \S+ started\.$/ }).waitFor();
      const ran = row.and(page.locator(':not([data-last-run=""])'));
      await ran.waitFor();
      const runId = (await ran.getAttribute('data-last-run'))!;
      await page.screenshot({ path: `${ARTIFACTS}/console-schedules.png` });
      expect(await settled(runId)).toMatchObject({ status: 'succeeded', scheduleId: id, tags: [tag] });

      // Its runs: the runs list searched by the schedule, each run naming it.
      await row.locator('a[data-role="schedule-runs"]').click();
      await page.waitForURL((url) => url.searchParams.get('scheduleId') === id);
      const listed = page.locator(`tr[data-run-id="${runId}"][data-status="succeeded"]`);
      await listed.waitFor();
      await expect(listed.locator('[data-role="started-by"]').textContent()).resolves.toBe(id);
      expect(await page.locator('tr[data-run-id]').count()).toBe(1);

      await page.goto(`${stack.url}${CONSOLE_PAGES.schedules}`);
      await row.locator('[data-action="resume"]').click();
      await row.and(page.locator('[data-paused="false"]')).waitFor();
      await expect(row.locator('[data-role="next-fire"]').textContent()).resolves.not.toBe('—');
      await row.locator('[data-action="pause"]').click();
      await row.and(page.locator('[data-paused="true"]')).waitFor();

      page.once('dialog', (dialog) => void dialog.accept());
      await row.locator('[data-action="delete"]').click();
      await row.waitFor({ state: 'detached' });
    });
    await expect(api('get', `/v1/schedules/${id}`)).rejects.toThrow(/answered 404/);
  }, 60_000);
});

describe('triggers', () => {
  it('lists a trigger with its event, filter and batch, links to its runs, and deletes it', async () => {
    const event = `console.trigger.${Date.now()}`;
    const { id } = (await api('post', '/v1/triggers', {
      event,
      filter: { path: 'payload.total', gte: 100 },
      batch: { maxSize: 50, maxWaitMs: 10_000 },
      description: 'big orders',
      request: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
    })) as { id: string };
    await inConsole('triggers', async (page) => {
      await page.goto(`${stack.url}${CONSOLE_PAGES.triggers}`);
      const row = page.locator(`[data-role="triggers"] tr[data-trigger-id="${id}"][data-event="${event}"]`);
      await row.waitFor();
      await expect(row.locator('[data-role="filter"]').textContent()).resolves.toBe('payload.total gte 100');
      await expect(row.locator('[data-role="grouping"]').textContent()).resolves.toBe(
        'batch of up to 50 within 10 s',
      );
      await expect(row.textContent()).resolves.toContain('big orders');
      await page.screenshot({ path: `${ARTIFACTS}/console-triggers.png` });

      await row.locator('a[data-role="trigger-runs"]').click();
      await page.waitForURL((url) => url.searchParams.get('triggerId') === id);
      await page.locator('[data-page="runs"] [data-role="runs"][data-loaded="true"]').waitFor();

      await page.goto(`${stack.url}${CONSOLE_PAGES.triggers}`);
      page.once('dialog', (dialog) => void dialog.accept());
      await row.locator('[data-action="delete"]').click();
      await row.waitFor({ state: 'detached' });
      await page.locator('[data-role="notice"]', { hasText: 'Delete: done.' }).waitFor();
    });
    await expect(api('get', `/v1/triggers/${id}`)).rejects.toThrow(/answered 404/);
  }, 60_000);
});

describe('sessions and lessons', () => {
  it('sends a message from a session’s page and shows the transcript with the reply', async () => {
    const sessionKey = `console-${Date.now()}`;
    await inConsole('session', async (page) => {
      await page.goto(`${stack.url}/console/sessions/${sessionKey}`);
      await page.locator('[data-lane="new"]').waitFor();
      const box = page.locator('form[data-role="send-message"]');
      await box.locator('textarea').fill('hello console');
      await box.locator('button[type="submit"]').click();
      const transcript = page.locator('[data-role="transcript"]');
      await transcript
        .locator('[data-type="message"][data-role="user"]', { hasText: 'hello console' })
        .waitFor();
      await transcript
        .locator('[data-type="message"][data-role="assistant"]', { hasText: 'echo: hello console' })
        .waitFor();
      await transcript.locator('[data-type="run"]').waitFor();
      await page.goto(`${stack.url}/console/sessions`);
      await page.locator(`[data-role="sessions"] tr[data-session-key="${sessionKey}"]`).waitFor();
    });
  }, 60_000);

  it('lists an agent’s lessons page (empty for a new agent)', async () => {
    await inConsole('lessons', async (page) => {
      await page.goto(`${stack.url}${CONSOLE_PAGES.lessons.replace(':agentId', 'main')}`);
      await page.locator('[data-page="lessons"] [data-role="lessons"] tbody tr').first().waitFor();
    });
  });
});
