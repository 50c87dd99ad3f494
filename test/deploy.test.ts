/**
 * Deployment files stay consistent with the code and with each other: docker-compose.yml, the
 * Dockerfile, k8s/*.yaml, the Prometheus config and alerts, and the Grafana dashboard. Every metric
 * a PromQL expression names must be one the code registers. Files only: no network, no Docker.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { POOLS, toolQueueName } from '@tetraloop/core/queues';
import { registry } from '@tetraloop/core/telemetry';
import { parseApiEnv } from '@tetraloop/api';
import { parseWorkerEnv } from '@tetraloop/workers';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { layered, readConfigFile, type ConfigFile } from '../apps/cli/src/config-file.js';
import { CATALOG } from '../apps/cli/src/settings-catalog.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** A config file given as text (a ConfigMap's), read as the CLI reads one. */
function configFileOf(text: string): ConfigFile {
  const path = join(mkdtempSync(join(tmpdir(), 'tetraloop-deploy-')), 'tetraloop.yaml');
  writeFileSync(path, text);
  return readConfigFile(path, CATALOG);
}

/** The environment a process sees from a config file alone. */
const envOfFile = (file: ConfigFile): Record<string, string> =>
  layered({}, file, CATALOG).env as Record<string, string>;
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

type Labels = Record<string, string>;

interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string | string[];
  environment?: Record<string, string | null>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test: string | string[] };
  stop_grace_period?: string;
}

interface Probe {
  httpGet?: { path: string; port: number | string };
  exec?: { command: string[] };
  tcpSocket?: { port: number | string };
}

interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
  }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: Probe };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Labels };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  spec?: {
    selector?: Labels | { matchLabels: Labels };
    template?: {
      metadata: { labels: Labels; annotations?: Record<string, string> };
      spec: {
        containers: Container[];
        terminationGracePeriodSeconds?: number;
        volumes?: { name: string; configMap?: { name: string } }[];
      };
    };
    scaleTargetRef?: { kind?: string; name: string };
    triggers?: { type: string; metadata: { query?: string; ignoreNullValues?: string } }[];
    metrics?: { type: string; external?: { metric: { selector?: { matchLabels?: Labels } } } }[];
  };
}

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: { expr: string; datasource?: { uid: string } }[];
  panels?: Panel[];
}

interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type?: string; query: string | { query: string } }[] };
}

interface AlertRules {
  groups: { name: string; rules: { alert: string; expr: string; for?: string }[] }[];
}

interface PromConfig {
  rule_files: string[];
  scrape_configs: {
    job_name: string;
    dns_sd_configs?: { names: string[]; port: number }[];
    static_configs?: { targets: string[] }[];
  }[];
}

/** A Compose value that is only a required variable (`${VAR:?message}` or `${VAR?message}`). */
const REQUIRED_VARIABLE = /^\$\{(\w+):?\?[^}]*\}$/;

/** The credentials a deployment must bring from its secret store, by the processes that read them. */
const CREDENTIALS = {
  api: ['TETRALOOP_ADMIN_TOKEN', 'TETRALOOP_SECRET_KEY'],
  worker: ['TETRALOOP_SECRET_KEY'],
} as const;

/**
 * k8s/worker-tool-crm.yaml: an example of a team's own tool workers, a Deployment of the team's image
 * serving the custom tools of the `crm` queue, with its own ScaledObject and budget.
 */
const TEAM_TOOL_WORKERS = {
  file: 'worker-tool-crm.yaml',
  name: 'tetraloop-worker-tool-crm',
  component: 'worker-tool-crm',
  queue: 'crm',
} as const;

const subset = (small: Labels, big: Labels): boolean => Object.entries(small).every(([k, v]) => big[k] === v);

/** Metric names in a PromQL expression; string literals (label values) are left out first. */
function metricNames(expr: string): string[] {
  const bare = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
  return [...bare.matchAll(/\b(tetraloop_[a-z0-9_]+|up|process_[a-z0-9_]+|nodejs_[a-z0-9_]+)\b/g)].map(
    (m) => m[1]!,
  );
}

/**
 * Gauges of shared Redis state: every API and worker process reports them, each with the same
 * value, so a query must take their `max` across processes before anything else.
 */
const SHARED_GAUGES = new Set([
  'tetraloop_queue_jobs',
  'tetraloop_queue_stalled',
  'tetraloop_redis_up',
  'tetraloop_lessons',
  'tetraloop_lanes_busy',
  'tetraloop_lane_waiting_items',
  'tetraloop_tool_workers',
]);

/** The shared gauges `expr` reads other than straight through a `max` or `max by (…)`. */
function notMaxed(expr: string): string[] {
  return [...expr.matchAll(/\b(tetraloop_[a-z0-9_]+)\b/g)]
    .filter((m) => SHARED_GAUGES.has(m[1]!))
    .filter((m) => !/\bmax\s*(?:by\s*\([^)]*\)\s*)?\(\s*$/.test(expr.slice(0, m.index)))
    .map((m) => m[1]!);
}

function loadK8s(): Map<string, K8sObject[]> {
  const files = new Map<string, K8sObject[]>();
  for (const file of readdirSync(join(ROOT, 'k8s')).filter((f) => f.endsWith('.yaml'))) {
    const docs = parseAllDocuments(read(`k8s/${file}`));
    if (!Array.isArray(docs)) throw new Error(`k8s/${file}: empty`);
    const objects: K8sObject[] = [];
    for (const doc of docs) {
      if (doc.errors.length > 0) throw new Error(`k8s/${file}: ${doc.errors[0]!.message}`);
      const value = doc.toJS() as K8sObject | null;
      if (value !== null) objects.push(value);
    }
    files.set(file, objects);
  }
  return files;
}

function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

describe('deployment files', () => {
  let registered: Map<string, string>;
  const compose = parse(read('docker-compose.yml'), { merge: true }) as {
    services: Record<string, ComposeService>;
  };
  const k8s = loadK8s();
  const objects = [...k8s.values()].flat();
  const ofKind = (kind: string): K8sObject[] => objects.filter((o) => o.kind === kind);
  const alerts = parse(read('ops/prometheus/alerts.yml')) as AlertRules;
  const prometheus = parse(read('ops/prometheus/prometheus.yml')) as PromConfig;
  const dashboard = JSON.parse(read('ops/grafana/dashboards/tetraloop.json')) as Dashboard;

  beforeAll(async () => {
    const metrics = await registry.getMetricsAsJSON();
    registered = new Map(metrics.map((m) => [m.name, String(m.type)]));
  });

  /** Whether `name` is a series the processes (or Prometheus itself, for `up`) expose. */
  function isKnown(name: string): boolean {
    if (name === 'up' || registered.has(name)) return true;
    const suffix = /_(bucket|sum|count)$/.exec(name);
    if (!suffix) return false;
    const type = registered.get(name.slice(0, -suffix[0].length));
    return type === 'histogram' || (type === 'summary' && suffix[1] !== 'bucket');
  }

  function expectKnownMetrics(where: string, expr: string): void {
    const names = metricNames(expr);
    expect(names, `${where} names no metric: ${expr}`).not.toEqual([]);
    for (const name of names) expect(isKnown(name), `${where}: unknown metric ${name} in ${expr}`).toBe(true);
  }

  describe('Dockerfile', () => {
    const dockerfile = read('Dockerfile');

    it('builds one non-root image that runs the tetraloop bin, the API by default', () => {
      expect(dockerfile).toMatch(/^FROM \$\{NODE_IMAGE\} AS deps$/m);
      expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:20-bookworm-slim$/m);
      expect(dockerfile).toMatch(/npm ci --omit=dev/);
      expect(dockerfile).toMatch(/^USER node$/m);
      expect(dockerfile).toContain('ENTRYPOINT ["node", "apps/cli/bin/tetraloop.mjs"]');
      expect(dockerfile).toContain('CMD ["api"]');
      expect(dockerfile).toMatch(/^EXPOSE 3000 9464$/m);
      expect(existsSync(join(ROOT, 'apps/cli/bin/tetraloop.mjs'))).toBe(true);
    });

    it('copies every workspace manifest before npm ci (the lockfile names each workspace)', () => {
      const { workspaces } = JSON.parse(read('package.json')) as { workspaces: string[] };
      for (const workspace of workspaces) {
        expect(dockerfile, workspace).toContain(`COPY ${workspace}/package.json ${workspace}/\n`);
      }
    });

    it('runs the built JavaScript, staged by the build stage, with neither the sources nor tsx', () => {
      expect(dockerfile).toMatch(/^RUN npm run build -- --no-types --out-dir \/stage$/m);
      expect(dockerfile).toContain('COPY --from=build /stage/libs ./libs\n');
      expect(dockerfile).toContain('COPY --from=build /stage/apps ./apps\n');
      const cli = JSON.parse(read('apps/cli/package.json')) as { dependencies?: Record<string, string> };
      expect(cli.dependencies).not.toHaveProperty('tsx');
      // What a package ships besides its dist/ (the bin, the console's browser code) is in the context.
      const allowed = read('.dockerignore')
        .split('\n')
        .filter((line) => line.startsWith('!'))
        .map((line) => new RegExp(`^${line.slice(1).replace(/\*/g, '[^/]+')}$`));
      const { workspaces } = JSON.parse(read('package.json')) as { workspaces: string[] };
      for (const workspace of workspaces) {
        const { files = [] } = JSON.parse(read(`${workspace}/package.json`)) as { files?: string[] };
        for (const entry of files.filter((f) => f !== 'dist')) {
          expect(
            allowed.some((re) => re.test(`${workspace}/${entry}`)),
            `${workspace}/${entry}`,
          ).toBe(true);
        }
      }
    });
  });

  describe('docker-compose.yml', () => {
    const services = compose.services;
    /**
     * The variables a service sets, with `${VAR:-default}` taken as its default (as with VAR unset);
     * pass-through ones, without a value, and required ones (`${VAR:?message}`, which have no
     * default: Compose refuses to start without them) are left out.
     */
    const composeEnv = (s: ComposeService): Record<string, string> =>
      Object.fromEntries(
        Object.entries(s.environment ?? {})
          .filter((e): e is [string, string] => typeof e[1] === 'string')
          .filter(([, v]) => !REQUIRED_VARIABLE.test(v))
          .map(([k, v]) => [
            k,
            v.replace(/\$\{\w+(?::?-([^}]*))?\}/g, (_m, fallback?: string) => fallback ?? ''),
          ]),
      );
    const command = (name: string): string => {
      const c = services[name]?.command;
      return Array.isArray(c) ? c.join(' ') : (c ?? '');
    };

    it('has Redis, the API, one service per pool, Prometheus, Grafana and Jaeger', () => {
      expect(Object.keys(services).sort()).toEqual(
        ['api', 'grafana', 'jaeger', 'prometheus', 'redis', ...POOLS.map((p) => `worker-${p}`)].sort(),
      );
    });

    it("sends every Tetraloop process's spans to Jaeger over OTLP/HTTP", () => {
      for (const name of ['api', ...POOLS.map((p) => `worker-${p}`)])
        expect(composeEnv(services[name]!).OTEL_EXPORTER_OTLP_ENDPOINT, name).toBe('http://jaeger:4318');
      expect(services.jaeger!.environment).toMatchObject({ COLLECTOR_OTLP_ENABLED: 'true' });
    });

    it('runs Redis with AOF every second and no eviction, on a volume', () => {
      const redis = services.redis!;
      expect(redis.image).toMatch(/^redis:7/);
      const cmd = command('redis');
      expect(cmd).toMatch(/--appendonly yes/);
      expect(cmd).toMatch(/--appendfsync everysec/);
      expect(cmd).toMatch(/--maxmemory-policy noeviction/);
      expect(redis.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
    });

    it('runs the API and each pool from the same build, against the redis service', () => {
      expect(command('api')).toBe('api');
      expect(services.api!.ports).toContain('3000:3000');
      expect(JSON.stringify(services.api!.healthcheck?.test)).toContain('/readyz');
      for (const name of ['api', ...POOLS.map((p) => `worker-${p}`)]) {
        const s = services[name]!;
        expect(s.build, name).toBe('.');
        expect(s.environment?.REDIS_URL, name).toBe('redis://redis:6379');
      }
      for (const pool of POOLS) {
        const s = services[`worker-${pool}`]!;
        expect(command(`worker-${pool}`)).toBe(`worker --pool ${pool} --metrics-port 9464`);
        expect(JSON.stringify(s.healthcheck?.test)).toContain('9464/readyz');
      }
    });

    it('runs the API with auth required, and the root token and the secret key from outside, with no default', () => {
      const api = services.api!;
      expect(api.environment?.TETRALOOP_AUTH).toBe('required');
      expect(parseApiEnv(composeEnv(api)).TETRALOOP_AUTH).toBe('required');
      for (const name of ['api', ...POOLS.map((p) => `worker-${p}`)]) {
        const environment = services[name]!.environment ?? {};
        for (const variable of CREDENTIALS[name === 'api' ? 'api' : 'worker']) {
          // `${VAR:?…}`: Compose refuses to start while it is unset; no literal, no fallback.
          const value = environment[variable];
          expect(value, `${name} ${variable}`).toEqual(expect.any(String));
          expect(REQUIRED_VARIABLE.exec(value!)?.[1], `${name} ${variable}: ${value}`).toBe(variable);
        }
      }
      // Nothing else in the file sets them either (a default hidden in an anchor, another service).
      const raw = read('docker-compose.yml');
      for (const variable of CREDENTIALS.api) {
        for (const line of raw.split('\n').filter((l) => new RegExp(`^\\s*${variable}:`).test(l))) {
          expect(line.trim(), line).toMatch(new RegExp(`^${variable}: '\\$\\{${variable}:\\?[^}]*\\}'$`));
        }
      }
      expect(read('.gitignore').split('\n')).toContain('.env');
    });

    it('lets every process finish its graceful shutdown before Compose kills it', () => {
      // Compose sends SIGKILL after 10 s unless stop_grace_period says otherwise.
      for (const name of ['api', ...POOLS.map((p) => `worker-${p}`)]) {
        const s = services[name]!;
        const env = composeEnv(s);
        const graceMs =
          name === 'api'
            ? parseApiEnv(env).TETRALOOP_SHUTDOWN_GRACE_MS
            : parseWorkerEnv(env).TETRALOOP_SHUTDOWN_GRACE_MS;
        const stopSeconds = Number(/^(\d+)s$/.exec(s.stop_grace_period ?? '10s')?.[1]);
        expect(stopSeconds * 1000, name).toBeGreaterThan(graceMs);
        if (name !== 'api') {
          // Long enough for the longest node (a model call) to finish.
          expect(graceMs, name).toBeGreaterThanOrEqual(parseWorkerEnv(env).TETRALOOP_MODEL_TIMEOUT_MS);
        }
      }
    });

    it('mounts the Prometheus config and the Grafana provisioning and dashboards', () => {
      expect(services.prometheus!.volumes).toContain('./ops/prometheus:/etc/prometheus:ro');
      const grafana = services.grafana!.volumes ?? [];
      expect(grafana).toContain('./ops/grafana/provisioning:/etc/grafana/provisioning:ro');
      expect(grafana).toContain('./ops/grafana/dashboards:/var/lib/grafana/dashboards:ro');
      for (const v of [...(services.prometheus!.volumes ?? []), ...grafana]) {
        if (v.startsWith('./')) expect(existsSync(join(ROOT, v.split(':')[0]!)), v).toBe(true);
      }
      const provider = parse(read('ops/grafana/provisioning/dashboards/dashboards.yml')) as {
        providers: { type: string; options: { path: string } }[];
      };
      expect(provider.providers[0]).toMatchObject({
        type: 'file',
        options: { path: '/var/lib/grafana/dashboards' },
      });
    });
  });

  describe('k8s', () => {
    const deployments = ofKind('Deployment');
    const templateLabels = (d: K8sObject): Labels => d.spec!.template!.metadata.labels;
    const selectorOf = (o: K8sObject): Labels => {
      const s = o.spec!.selector!;
      return 'matchLabels' in s ? (s.matchLabels as Labels) : s;
    };

    it('has the expected kinds in each file', () => {
      const kinds = Object.fromEntries([...k8s].map(([file, objs]) => [file, objs.map((o) => o.kind)]));
      expect(kinds).toEqual({
        'namespace.yaml': ['Namespace'],
        'configmap.yaml': ['ConfigMap'],
        'secret.yaml': ['Secret'],
        'api.yaml': ['Deployment', 'Service'],
        ...Object.fromEntries(POOLS.map((p) => [`worker-${p}.yaml`, ['Deployment']])),
        'keda.yaml': POOLS.map(() => 'ScaledObject'),
        'hpa.yaml': POOLS.map(() => 'HorizontalPodAutoscaler'),
        'pdb.yaml': ['PodDisruptionBudget', ...POOLS.map(() => 'PodDisruptionBudget')],
        [TEAM_TOOL_WORKERS.file]: ['Deployment', 'ScaledObject', 'PodDisruptionBudget'],
      });
      for (const o of objects.filter((o) => o.kind !== 'Namespace')) {
        expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe('tetraloop');
      }
    });

    it('labels every Deployment by name and component, and selects on its own template labels', () => {
      expect(deployments.map((d) => templateLabels(d)['app.kubernetes.io/component']).sort()).toEqual(
        ['api', ...POOLS.map((p) => `worker-${p}`), TEAM_TOOL_WORKERS.component].sort(),
      );
      for (const d of deployments) {
        const labels = templateLabels(d);
        expect(labels['app.kubernetes.io/name']).toBe('tetraloop');
        expect(Object.keys(selectorOf(d)).length).toBeGreaterThan(0);
        expect(subset(selectorOf(d), labels), d.metadata.name).toBe(true);
      }
    });

    it('points every Service and PodDisruptionBudget at a Deployment', () => {
      for (const o of [...ofKind('Service'), ...ofKind('PodDisruptionBudget')]) {
        const selector = selectorOf(o);
        expect(Object.keys(selector).length).toBeGreaterThan(0);
        expect(
          deployments.filter((d) => subset(selector, templateLabels(d))).length,
          `${o.kind} ${o.metadata.name}`,
        ).toBe(1);
      }
      // Every Deployment has its budget.
      for (const d of deployments) {
        const budgets = ofKind('PodDisruptionBudget').filter((p) => subset(selectorOf(p), templateLabels(d)));
        expect(budgets.length, d.metadata.name).toBe(1);
      }
    });

    it('probes every container on a port it declares', () => {
      for (const d of deployments) {
        for (const c of d.spec!.template!.spec.containers) {
          const ports = new Set<string | number>(
            (c.ports ?? []).flatMap((p) => [p.containerPort, p.name ?? '']),
          );
          for (const kind of ['livenessProbe', 'readinessProbe'] as const) {
            const probe = c[kind];
            expect(probe?.httpGet, `${d.metadata.name} ${kind}`).toBeDefined();
            expect(ports.has(probe!.httpGet!.port), `${d.metadata.name} ${kind} port`).toBe(true);
          }
          expect(c.livenessProbe!.httpGet!.path).toBe('/healthz');
          expect(c.readinessProbe!.httpGet!.path).toBe('/readyz');
        }
      }
    });

    it('gives every process its shutdown grace and preStop before the kill', () => {
      const config = ofKind('ConfigMap')[0]!;
      for (const d of deployments) {
        const spec = d.spec!.template!.spec;
        const c = spec.containers[0]!;
        const env: Record<string, string> = envOfFile(configFileOf(config.data!['tetraloop.yaml']!));
        for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
        const isApi = templateLabels(d)['app.kubernetes.io/component'] === 'api';
        const graceMs = isApi
          ? parseApiEnv(env).TETRALOOP_SHUTDOWN_GRACE_MS
          : parseWorkerEnv(env).TETRALOOP_SHUTDOWN_GRACE_MS;
        const preStop = c.lifecycle?.preStop?.exec?.command ?? [];
        expect(preStop[0], d.metadata.name).toBe('sleep');
        const budgetMs = (spec.terminationGracePeriodSeconds ?? 30) * 1000;
        expect(budgetMs, d.metadata.name).toBeGreaterThan(graceMs + Number(preStop[1]) * 1000);
        if (!isApi) {
          const worker = parseWorkerEnv(env);
          const longestNodeMs = Math.max(worker.TETRALOOP_TOOL_TIMEOUT_MS, worker.TETRALOOP_MODEL_TIMEOUT_MS);
          expect(spec.terminationGracePeriodSeconds, d.metadata.name).toBeGreaterThan(60);
          expect(budgetMs, d.metadata.name).toBeGreaterThan(longestNodeMs);
          expect(graceMs, d.metadata.name).toBeGreaterThanOrEqual(longestNodeMs);
        }
        expect(c.resources?.requests, d.metadata.name).toBeDefined();
      }
    });

    it('runs the API and each pool with the same commands as Compose', () => {
      const byComponent = new Map(
        deployments.map((d) => [templateLabels(d)['app.kubernetes.io/component'], d]),
      );
      expect(byComponent.get('api')!.spec!.template!.spec.containers[0]!.args).toEqual(['api']);
      for (const pool of POOLS) {
        const d = byComponent.get(`worker-${pool}`)!;
        const spec = d.spec!.template!.spec;
        expect(spec.containers[0]!.args).toEqual(['worker', '--pool', pool, '--metrics-port', '9464']);
        expect(d.spec!.template!.metadata.annotations?.['prometheus.io/port']).toBe('9464');
      }
    });

    it('has a config file the processes accept, mounted where TETRALOOP_CONFIG says, with a hash-tagged prefix, and the Secret keys they use', () => {
      const config = ofKind('ConfigMap')[0]!;
      const secret = ofKind('Secret')[0]!;
      const file = configFileOf(config.data!['tetraloop.yaml']!);
      expect(file.problems).toEqual([]);
      const env = envOfFile(file);
      expect(env.TETRALOOP_PREFIX).toMatch(/^\{[^{}]+\}$/);
      expect(env.TETRALOOP_CONFIG_VERSION).toBeTruthy();
      expect(() => parseApiEnv(env)).not.toThrow();
      expect(() => parseWorkerEnv(env)).not.toThrow();
      for (const d of deployments) {
        const spec = d.spec!.template!.spec;
        const volume = spec.volumes?.find((v) => v.configMap?.name === config.metadata.name);
        expect(volume, d.metadata.name).toBeDefined();
        for (const c of spec.containers) {
          const mounts = (c as { volumeMounts?: { name: string; mountPath: string }[] }).volumeMounts ?? [];
          const mount = mounts.find((m) => m.name === volume!.name);
          expect(c.env?.find((e) => e.name === 'TETRALOOP_CONFIG')?.value, d.metadata.name).toBe(
            `${mount!.mountPath}/tetraloop.yaml`,
          );
          for (const from of c.envFrom ?? []) {
            if (from.configMapRef) expect(from.configMapRef.name).toBe(config.metadata.name);
            if (from.secretRef) expect(from.secretRef.name).toBe(secret.metadata.name);
          }
          for (const e of c.env ?? []) {
            const ref = e.valueFrom?.secretKeyRef;
            if (!ref) continue;
            // A team's tool workers may also read a Secret of the team's own (its CRM credentials).
            if (ref.name !== secret.metadata.name && d.metadata.name === TEAM_TOOL_WORKERS.name) continue;
            expect(ref.name).toBe(secret.metadata.name);
            expect(secret.stringData ?? secret.data).toHaveProperty(ref.key);
          }
        }
      }
    });

    it('runs the API with auth required, and the root token and the secret key from the Secret only', () => {
      const config = ofKind('ConfigMap')[0]!;
      const secret = ofKind('Secret')[0]!;
      const fileEnv = envOfFile(configFileOf(config.data!['tetraloop.yaml']!));
      for (const d of deployments) {
        const isApi = templateLabels(d)['app.kubernetes.io/component'] === 'api';
        const c = d.spec!.template!.spec.containers[0]!;
        const env: Record<string, string> = { ...fileEnv };
        for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
        if (isApi) {
          expect(c.env?.find((e) => e.name === 'TETRALOOP_AUTH')?.value).toBe('required');
          expect(parseApiEnv(env).TETRALOOP_AUTH).toBe('required');
        }
        for (const variable of CREDENTIALS[isApi ? 'api' : 'worker']) {
          const entries = (c.env ?? []).filter((e) => e.name === variable);
          expect(entries, `${d.metadata.name} ${variable}`).toHaveLength(1);
          expect(entries[0]!.value, `${d.metadata.name} ${variable}`).toBeUndefined();
          // Not optional: a Secret without it keeps the pod from starting.
          expect(entries[0]!.valueFrom?.secretKeyRef, `${d.metadata.name} ${variable}`).toEqual({
            name: secret.metadata.name,
            key: variable,
          });
          expect(fileEnv[variable], variable).toBeUndefined();
        }
      }
      // The Secret's placeholders fail the processes' checks: applied unchanged, nothing boots.
      const placeholders = { ...secret.data, ...secret.stringData };
      expect(() =>
        parseApiEnv({ ...fileEnv, TETRALOOP_ADMIN_TOKEN: placeholders.TETRALOOP_ADMIN_TOKEN }),
      ).toThrow(/TETRALOOP_ADMIN_TOKEN/);
      for (const parse of [parseApiEnv, parseWorkerEnv]) {
        expect(() => parse({ ...fileEnv, TETRALOOP_SECRET_KEY: placeholders.TETRALOOP_SECRET_KEY })).toThrow(
          /TETRALOOP_SECRET_KEY/,
        );
      }
    });

    it('scales each pool on its queue backlog, with KEDA or with an HPA', () => {
      const names = new Set(deployments.map((d) => d.metadata.name));
      const pools = POOLS.map((p) => `tetraloop-worker-${p}`);
      // keda.yaml and hpa.yaml scale the pools; the team's example brings its own ScaledObject.
      const expected = { ScaledObject: [...pools, TEAM_TOOL_WORKERS.name], HorizontalPodAutoscaler: pools };
      for (const [kind, targets] of Object.entries(expected)) {
        const scalers = ofKind(kind);
        expect(scalers.map((s) => s.spec!.scaleTargetRef!.name).sort()).toEqual(targets.sort());
        for (const s of scalers) expect(names.has(s.spec!.scaleTargetRef!.name)).toBe(true);
      }
      for (const s of ofKind('ScaledObject').filter((o) => o.metadata.name !== TEAM_TOOL_WORKERS.name)) {
        const pool = s.spec!.scaleTargetRef!.name.replace('tetraloop-worker-', '');
        const query = s.spec!.triggers![0]!.metadata.query!;
        expect(s.spec!.triggers![0]!.type).toBe('prometheus');
        // No backlog reported (Redis unreachable) is an error that holds the replicas, not a zero.
        expect(s.spec!.triggers![0]!.metadata.ignoreNullValues).toBe('false');
        expect(query).toContain('tetraloop_queue_jobs');
        expect(query).toContain(`queue="${pool}"`);
        expectKnownMetrics(`ScaledObject ${s.metadata.name}`, query);
      }
      for (const h of ofKind('HorizontalPodAutoscaler')) {
        const pool = h.spec!.scaleTargetRef!.name.replace('tetraloop-worker-', '');
        expect(h.apiVersion).toBe('autoscaling/v2');
        expect(h.spec!.metrics![0]!.external?.metric.selector?.matchLabels).toEqual({ queue: pool });
      }
    });

    it("runs a team's own tool workers on their queue, scaled on that queue's backlog as the tool pool is on its own", () => {
      const [deployment, scaler, budget] = k8s.get(TEAM_TOOL_WORKERS.file)!;
      const config = ofKind('ConfigMap')[0]!;
      const pod = deployment!.spec!.template!;
      const c = pod.spec.containers[0]!;
      expect(deployment!.metadata.name).toBe(TEAM_TOOL_WORKERS.name);
      expect(pod.metadata.labels['app.kubernetes.io/component']).toBe(TEAM_TOOL_WORKERS.component);
      // The team's image, not Tetraloop's, running the tool pool on its queue alone.
      expect(c.image).not.toMatch(/^tetraloop:/);
      expect(c.args).toEqual([
        'worker',
        '--pool',
        'tool',
        '--tools',
        '/app/tools/dist/tools.js',
        '--queues',
        TEAM_TOOL_WORKERS.queue,
        '--metrics-port',
        '9464',
      ]);
      expect(pod.metadata.annotations?.['prometheus.io/port']).toBe('9464');
      // What those flags set (apps/cli/src/main.ts), on the deployment's config file: a worker accepts it.
      const env: Record<string, string> = envOfFile(configFileOf(config.data!['tetraloop.yaml']!));
      for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
      const worker = parseWorkerEnv({
        ...env,
        TETRALOOP_TOOL_MODULES: '/app/tools/dist/tools.js',
        TETRALOOP_TOOL_QUEUES: TEAM_TOOL_WORKERS.queue,
      });
      expect(worker.TETRALOOP_TOOL_QUEUES).toEqual([TEAM_TOOL_WORKERS.queue]);
      // An example of the team's own credentials, from a Secret of its own.
      const own = (c.env ?? []).filter((e) => e.valueFrom?.secretKeyRef?.name === 'crm-credentials');
      expect(own.map((e) => e.name)).toEqual(['CRM_API_TOKEN']);

      // Its own ScaledObject: the tool pool's query, on the BullMQ name of its queue (`tool.crm`).
      const tool = ofKind('ScaledObject').find((s) => s.metadata.name === 'tetraloop-worker-tool')!;
      expect(scaler!.kind).toBe('ScaledObject');
      expect(scaler!.spec!.scaleTargetRef).toMatchObject({
        kind: 'Deployment',
        name: TEAM_TOOL_WORKERS.name,
      });
      expect(scaler!.spec!.triggers).toEqual([
        {
          ...tool.spec!.triggers![0],
          metadata: {
            ...tool.spec!.triggers![0]!.metadata,
            query: tool.spec!.triggers![0]!.metadata.query!.replace(
              'queue="tool"',
              `queue="${toolQueueName(TEAM_TOOL_WORKERS.queue)}"`,
            ),
          },
        },
      ]);
      expect(scaler!.spec!.triggers![0]!.metadata.query).toContain('queue="tool.crm"');
      // Never to zero, as keda.yaml's pools: its workers keep the queue's tools in the catalog.
      expect((scaler!.spec as { minReplicaCount?: number }).minReplicaCount).toBeGreaterThanOrEqual(1);
      expect(budget!.kind).toBe('PodDisruptionBudget');
    });
  });

  describe('Prometheus', () => {
    it('scrapes the API and each pool as a job of its own, and loads the alerts', () => {
      expect(prometheus.rule_files).toEqual(['alerts.yml']);
      const jobs = new Map(prometheus.scrape_configs.map((j) => [j.job_name, j]));
      const expected: [string, string, number][] = [
        ['tetraloop-api', 'api', 3000],
        ...POOLS.map((p): [string, string, number] => [`tetraloop-worker-${p}`, `worker-${p}`, 9464]),
      ];
      for (const [job, service, port] of expected) {
        expect(jobs.get(job)?.dns_sd_configs?.[0], job).toMatchObject({ names: [service], port });
        expect(compose.services[service], service).toBeDefined();
      }
    });

    it('has the alerts, each on registered metrics only', () => {
      const rules = alerts.groups.flatMap((g) => g.rules);
      expect(rules.map((r) => r.alert)).toEqual(
        expect.arrayContaining([
          'TetraloopQueueStalled',
          'TetraloopRunFailureRatioHigh',
          'TetraloopBacklogGrowing',
          'TetraloopWorkerPoolDown',
          'TetraloopApiDown',
          'ToolWithoutWorkers',
          'TetraloopJobsSentBackRedisAway',
        ]),
      );
      for (const rule of rules) expectKnownMetrics(`alert ${rule.alert}`, rule.expr);
    });
  });

  describe('Grafana dashboard', () => {
    const panels = allPanels(dashboard.panels);
    const datasource = parse(read('ops/grafana/provisioning/datasources/prometheus.yml')) as {
      datasources: { uid: string; type: string }[];
    };

    it('is a dashboard on the provisioned datasource, with unique panel ids inside the grid', () => {
      expect(dashboard.uid).toBeTruthy();
      expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
      const uid = datasource.datasources[0]!.uid;
      expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
      for (const p of panels) {
        expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
        if (p.type === 'row') continue;
        expect(p.datasource?.uid, p.title).toBe(uid);
        expect(p.targets?.length, p.title).toBeGreaterThan(0);
      }
    });

    it('has the panels operators need', () => {
      const titles = panels.map((p) => p.title).join('\n');
      for (const t of [
        /Runs \/ s by outcome/,
        /Run duration p50/,
        /Node duration p50/,
        /Queue depth per queue/,
      ]) {
        expect(titles).toMatch(t);
      }
      for (const t of [/Retries/, /Tokens \/ s/, /Lane wait/, /Stall alarms/]) expect(titles).toMatch(t);
      // The team's own tools: their workers and the jobs a process without their code put back.
      for (const t of [/Custom tools: live workers/, /Custom tool jobs not served here \/ s/])
        expect(titles).toMatch(t);
      // The plan cache, the reflect loop and the blobs.
      for (const t of [
        /Plan cache lookups \/ s by outcome/,
        /Reflections \/ s/,
        /Reflection duration p50/,
        /Lesson applications \/ s by kind/,
        /Lessons by status/,
        /Blob bytes \/ s, stored and deduplicated/,
        /Model cost USD \/ h by model/,
        /Model cost USD \/ h by tenant/,
        /Model cost USD \/ h, top 10 agents/,
      ]) {
        expect(titles).toMatch(t);
      }
      const exprs = panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)).join('\n');
      for (const metric of [
        'tetraloop_plan_cache_total',
        'tetraloop_reflections_total',
        'tetraloop_reflection_duration_seconds_bucket',
        'tetraloop_lesson_applications_total',
        'tetraloop_lessons',
        'tetraloop_blob_bytes_total',
        'tetraloop_long_requests_open',
        'tetraloop_long_requests_refused_total',
        'tetraloop_model_cost_usd_total',
        'tetraloop_model_unpriced_calls_total',
        'tetraloop_tool_workers',
        'tetraloop_tool_jobs_not_served_here_total',
      ]) {
        expect(exprs).toMatch(new RegExp(`\\b${metric}\\b`));
      }
      for (const quantile of ['0.5', '0.95', '0.99']) {
        expect(exprs).toContain(
          `histogram_quantile(${quantile}, sum by (le) (rate(tetraloop_run_duration_seconds_bucket`,
        );
        expect(exprs).toContain(
          `histogram_quantile(${quantile}, sum by (le) (rate(tetraloop_node_duration_seconds_bucket`,
        );
      }
    });

    it('shows every queue in its queue panels, the custom tool queues (tool.crm) among them', () => {
      const variable = dashboard.templating.list.find((v) => v.name === 'queue')! as {
        query: { query: string };
        includeAll?: boolean;
        allValue?: string;
      };
      // The queues are the gauge's own label values, not a fixed list; All matches any of them.
      expect(variable.query.query).toBe('label_values(tetraloop_queue_jobs, queue)');
      expect(variable.includeAll).toBe(true);
      expect(new RegExp(`^(?:${variable.allValue})$`).test(toolQueueName(TEAM_TOOL_WORKERS.queue))).toBe(
        true,
      );
      const queuePanels = panels.filter((p) =>
        (p.targets ?? []).some((t) => /\btetraloop_queue_(jobs|stalled)\b/.test(t.expr)),
      );
      expect(queuePanels.length).toBeGreaterThanOrEqual(4);
      for (const p of queuePanels) {
        for (const t of p.targets ?? []) {
          expect(t.expr, p.title).toContain('queue=~"$queue"');
          expect((t as { legendFormat?: string }).legendFormat, p.title).toContain('{{queue}}');
        }
      }
    });

    it('queries registered metrics only', () => {
      for (const p of panels) {
        for (const t of p.targets ?? []) expectKnownMetrics(`panel ${p.title}`, t.expr);
      }
      // Query variables read metrics; a textbox (the run id for the trace link) is typed in.
      for (const v of dashboard.templating.list.filter((t) => t.type !== 'textbox')) {
        expectKnownMetrics(`variable ${v.name}`, typeof v.query === 'string' ? v.query : v.query.query);
      }
    });
  });

  it('combines the gauges every process reports alike with max, never adds them across processes', () => {
    const queries = [
      ...alerts.groups.flatMap((g) => g.rules.map((r) => [`alert ${r.alert}`, r.expr])),
      ...allPanels(dashboard.panels).flatMap((p) =>
        (p.targets ?? []).map((t) => [`panel ${p.title}`, t.expr]),
      ),
      ...ofKind('ScaledObject').map((o) => [
        `ScaledObject ${o.metadata.name}`,
        o.spec!.triggers![0]!.metadata.query!,
      ]),
    ];
    const shared = queries.filter(([, expr]) => metricNames(expr!).some((n) => SHARED_GAUGES.has(n)));
    expect(shared.length).toBeGreaterThan(10);
    for (const [where, expr] of shared) expect(notMaxed(expr!), `${where}: ${expr}`).toEqual([]);
    // The check itself.
    expect(notMaxed('sum by (queue) (tetraloop_queue_jobs{state="waiting"})')).toEqual([
      'tetraloop_queue_jobs',
    ]);
    expect(notMaxed('min(tetraloop_redis_up) == 0')).toEqual(['tetraloop_redis_up']);
    expect(
      notMaxed('sum(max by (state) (tetraloop_queue_jobs{queue="tool"})) + max(tetraloop_redis_up)'),
    ).toEqual([]);
  });

  it('extracts metric names from PromQL the way the checks above rely on', () => {
    expect(
      metricNames(
        'histogram_quantile(0.9, sum by (le) (rate(tetraloop_run_duration_seconds_bucket{status="x_y"}[5m]))) + up + nodejs_eventloop_lag_p99_seconds',
      ),
    ).toEqual(['tetraloop_run_duration_seconds_bucket', 'up', 'nodejs_eventloop_lag_p99_seconds']);
    expect(isKnown('tetraloop_run_duration_seconds_bucket')).toBe(true);
    expect(isKnown('tetraloop_runs_finished_total_bucket')).toBe(false);
    expect(isKnown('tetraloop_no_such_metric')).toBe(false);
  });
});
