/**
 * The alerts and the autoscaling query, evaluated by a real Prometheus while no API process is
 * up: one `tetraloop worker` (the plan pool only) on a Redis of its own, scraped every second;
 * the API's scrape target is a closed port. The repository's own rules (ops/prometheus/alerts.yml,
 * expressions unchanged) and the exact KEDA query (k8s/keda.yaml) are what is evaluated.
 *
 * - With the API down, TetraloopApiDown fires and TetraloopRedisDown never does: the worker's own
 *   check says Redis is up.
 * - Runs submitted while the tool pool is absent leave a known backlog in the tool queue: the KEDA
 *   query answers exactly that count, although two reporters export the same shared gauge, and the
 *   stall alarm fires from the worker.
 * - Redis killed: TetraloopRedisDown fires from the worker's gauge, and the worker stops reporting
 *   depths it can no longer read.
 *
 * Skipped only when no `prometheus` binary is on PATH (.ci/run installs Debian's).
 *
 * The rules' own unit tests (ops/prometheus/alerts.test.yml: ToolWithoutWorkers on synthetic
 * series of custom tool queues and their workers) run with `promtool test rules`, which Debian's
 * prometheus package brings along; skipped without it.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { parseApiEnv } from '@tetraloop/api';
import { createLogger } from '@tetraloop/core/logging';
import { closeQueues, openQueues } from '@tetraloop/core/queues';
import { RunRequest } from '@tetraloop/core/runs';
import { buildServices, freePort, startRedisServer, type RedisServer } from '@tetraloop/core/runtime';
import { builtinTools, parseAllowHosts } from '@tetraloop/core/tools';
import { spawnTetraloop, stderrMatches, type Spawned } from './support/processes.js';
import { hasPrometheus, startPrometheus, until, type Prometheus, type Rule } from './support/prometheus.js';
import { testEnv } from './support/stack.js';

const root = new URL('../', import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8');

interface AlertRules {
  groups: { name: string; rules: { alert: string; expr: string; for?: string }[] }[];
}
const rules = parse(read('ops/prometheus/alerts.yml')) as AlertRules;

/** The query KEDA scales a pool on, exactly as k8s/keda.yaml has it. */
function kedaQuery(pool: string): string {
  for (const doc of parseAllDocuments(read('k8s/keda.yaml'))) {
    const o = doc.toJS() as {
      kind?: string;
      metadata: { name: string };
      spec: { triggers: { metadata: { query: string } }[] };
    };
    if (o.kind === 'ScaledObject' && o.metadata.name === `tetraloop-worker-${pool}`) {
      return o.spec.triggers[0]!.metadata.query;
    }
  }
  throw new Error(`no ScaledObject for ${pool} in k8s/keda.yaml`);
}

/** Runs left in the tool queue: one tool node each, and no tool pool to take them. */
const BACKLOG = 7;
const PRESENT = hasPrometheus();

describe.skipIf(!PRESENT)('alerts and autoscaling on a real Prometheus, with no API process', () => {
  let redis: RedisServer;
  let worker: Spawned;
  let prometheus: Prometheus;
  let workerEnv: Record<string, string>;

  const firing = async (alertname: string, labels: Record<string, string> = {}): Promise<boolean> =>
    (await prometheus.alerts()).some(
      (a) =>
        a.state === 'firing' &&
        a.labels.alertname === alertname &&
        Object.entries(labels).every(([k, v]) => a.labels[k] === v),
    );
  const value = async (expr: string): Promise<number[]> => (await prometheus.query(expr)).map((s) => s.value);
  const describeState = (): string =>
    `worker stderr:\n${worker?.stderr() ?? ''}\nprometheus log:\n${prometheus?.log() ?? ''}`;

  beforeAll(async () => {
    // A Redis of its own: the test kills it.
    redis = await startRedisServer();
    workerEnv = testEnv({ REDIS_URL: redis.url, TETRALOOP_QUEUE_CHECK_MS: '200' });
    const metricsPort = await freePort();
    worker = spawnTetraloop(['worker', '--pool', 'plan', '--metrics-port', String(metricsPort)], workerEnv);
    await stderrMatches(worker, /worker ready/);
    // Nothing listens there: the API is stopped.
    const apiPort = await freePort();
    prometheus = await startPrometheus(
      {
        global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
        rule_files: ['alerts.yml'],
        // The job names of ops/prometheus/prometheus.yml, on static targets.
        scrape_configs: [
          { job_name: 'tetraloop-api', static_configs: [{ targets: [`127.0.0.1:${apiPort}`] }] },
          {
            job_name: 'tetraloop-worker-plan',
            // The one worker scraped as two targets: two reporters of the same shared Redis state,
            // as several worker (and API) processes are in a deployment.
            static_configs: ['a', 'b'].map((replica) => ({
              targets: [`127.0.0.1:${metricsPort}`],
              labels: { replica },
            })),
          },
        ],
      },
      {
        // The project's rules with every `for:` removed (0 s), so an alert fires at the first
        // evaluation its expression holds instead of minutes later. The expressions are untouched.
        'alerts.yml': {
          groups: rules.groups.map((g) => ({
            ...g,
            rules: g.rules.map(({ for: _for, ...rule }) => rule),
          })),
        },
      },
    );
  }, 60_000);

  afterAll(async () => {
    await prometheus?.stop();
    await worker?.kill('SIGKILL');
    await redis?.stop();
  });

  it('loads every alert of ops/prometheus/alerts.yml, expressions unchanged, and evaluates them', async () => {
    const expected = rules.groups.flatMap((g) => g.rules);
    let last: Rule[] = [];
    const loaded = await until(
      'every rule evaluated',
      async () => {
        last = await prometheus.rules();
        return last.length === expected.length && last.every((r) => r.health === 'ok') && last;
      },
      { describe: () => JSON.stringify(last, null, 2) },
    );
    // Prometheus prints an expression its own way; the same expression has the same tokens.
    const tokens = (expr: string): string => expr.replace(/\s+/g, '');
    expect(loaded.map((r) => [r.name, tokens(r.query)])).toEqual(
      expected.map((r) => [r.alert, tokens(r.expr)]),
    );
  });

  it('fires TetraloopApiDown and never TetraloopRedisDown while the workers can read Redis', async () => {
    await until('TetraloopApiDown firing', () => firing('TetraloopApiDown'), { describe: describeState });
    // Both reporters scraped a few times, each evaluation since Prometheus started included.
    await until(
      'a few scrapes of the worker',
      async () => {
        const scrapes = await value('count_over_time(tetraloop_redis_up[1h])');
        return scrapes.length === 2 && scrapes.every((n) => n >= 3);
      },
      { describe: describeState },
    );
    expect(await value('tetraloop_redis_up')).toEqual([1, 1]);
    expect(await value('max(tetraloop_redis_up)')).toEqual([1]);
    // ALERTS holds a series for every evaluation an alert was pending or firing: none, ever.
    expect(await value('count_over_time(ALERTS{alertname="TetraloopRedisDown"}[1h])')).toEqual([]);
    expect(await firing('TetraloopRedisDown')).toBe(false);
  });

  it("answers the real backlog to the KEDA query and fires the stall alarm from the worker's gauges", async () => {
    // Runs accepted as the API accepts them, in this process: the plan pool takes each root job
    // and enqueues the run's tool node, which waits, since no process runs the tool pool.
    const client = new Redis(redis.url);
    const logger = createLogger({ level: 'silent', layer: 'api' });
    const queues = openQueues(client, workerEnv.TETRALOOP_PREFIX!, logger);
    const services = buildServices(
      parseApiEnv(workerEnv),
      client,
      queues,
      builtinTools({ egress: parseAllowHosts('') }),
      undefined,
      logger,
    );
    try {
      const request = RunRequest.parse({
        graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'wait', args: { ms: 1 } }] },
      });
      for (let i = 0; i < BACKLOG; i++) await services.runs.submit(request);
    } finally {
      await closeQueues(queues);
      await client.quit();
    }

    const tool = kedaQuery('tool');
    // Two reporters of the same count: the query must not double it.
    let last: number[] = [];
    await until(`${tool} = ${BACKLOG}`, async () => (last = await value(tool))[0] === BACKLOG, {
      describe: () => `last answer: ${JSON.stringify(last)}\n${describeState()}`,
    });
    expect(await value(tool)).toEqual([BACKLOG]);
    // The plan queue is drained: the plan pool took every root job (its gauge, scraped separately,
    // may lag the tool queue's by a scrape).
    let plan: number[] = [];
    await until(`${kedaQuery('plan')} = 0`, async () => (plan = await value(kedaQuery('plan')))[0] === 0, {
      describe: () => `last answer: ${JSON.stringify(plan)}\n${describeState()}`,
    });
    // The tool queue has pending work and no progress: the worker's stall check says so.
    await until('TetraloopQueueStalled{queue="tool"} firing', () =>
      firing('TetraloopQueueStalled', { queue: 'tool' }),
    );
    expect(await firing('TetraloopQueueStalled', { queue: 'plan' })).toBe(false);
  });

  it("fires TetraloopRedisDown from the worker's gauge once Redis is killed", async () => {
    process.kill(redis.pid, 'SIGKILL');
    await until('TetraloopRedisDown firing', () => firing('TetraloopRedisDown'), {
      timeoutMs: 20_000,
      describe: describeState,
    });
    expect(await value('tetraloop_redis_up')).toEqual([0, 0]);
    // A reporter that cannot read the queues reports no depth rather than its last one.
    expect(await value(kedaQuery('tool'))).toEqual([]);
    expect(await firing('TetraloopApiDown')).toBe(true);
  });
});

if (!PRESENT) {
  it.skip('alerts on a real Prometheus: skipped, no `prometheus` binary on PATH (apt-get install prometheus)', () => {});
}

const PROMTOOL = !spawnSync('promtool', ['--version'], { stdio: 'ignore' }).error;

describe.skipIf(!PROMTOOL)('alert rules on synthetic series, with promtool', () => {
  it('passes ops/prometheus/alerts.test.yml: ToolWithoutWorkers fires for a tool queue with nodes waiting and no live worker, and per tool for one whose jobs are put back with no worker having its code (default queue too), only then', () => {
    const tests = parse(read('ops/prometheus/alerts.test.yml')) as {
      rule_files: string[];
      tests: { alert_rule_test: { alertname: string }[] }[];
    };
    expect(tests.rule_files).toEqual(['alerts.yml']);
    expect(tests.tests.flatMap((t) => t.alert_rule_test.map((a) => a.alertname))).toContain(
      'ToolWithoutWorkers',
    );
    const result = spawnSync('promtool', ['test', 'rules', 'ops/prometheus/alerts.test.yml'], {
      cwd: fileURLToPath(root),
      encoding: 'utf8',
    });
    expect(result.status, `${result.stdout}${result.stderr}`).toBe(0);
  });
});

if (!PROMTOOL) {
  it.skip('alert rules with promtool: skipped, no `promtool` binary on PATH (apt-get install prometheus)', () => {});
}
