/**
 * Property-based requests (fast-check) against every route of the route table: path parameters,
 * queries, headers and bodies generated at random and mutated from valid requests — wrong types,
 * huge strings, deep nesting, unicode, prototype keys, odd ids, broken JSON, wrong content types.
 * The API never answers 5xx, every refusal is `{error: {code, message}}`, and afterwards the API
 * and the workers still run a run. `npm test` sends a few hundred requests; `npm run fuzz` sends
 * 10,000 and prints the count of each status.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROUTES, type RouteName } from '@tetraloop/api';
import { startModelServer, type ModelServer } from './support/model-server.js';
import { startStack, type Stack } from './support/stack.js';

const REQUESTS = Number(process.env.TETRALOOP_FUZZ_REQUESTS ?? 300);
const ROOT = 'fuzz-root-token-0123456789-0123456789-abc';
let stack: Stack;
let model: ModelServer;
let runId: string;

beforeAll(async () => {
  model = await startModelServer({ script: () => ({ content: 'ok' }) });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool', 'reflect'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_SECRET_KEY: 'b'.repeat(64),
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Waits are bounded by the client; keep a fuzzed `timeoutMs` from holding the suite.
      TETRALOOP_MAX_WAIT_MS: '200',
    },
  });
  runId = (await runAsRoot('a')).runId;
}, 60_000);

/** Submits a one-node run with the root token and waits for its end. */
async function runAsRoot(node: string): Promise<{ runId: string; status: string }> {
  const headers = { authorization: `Bearer ${ROOT}`, 'content-type': 'application/json' };
  const posted = await fetch(`${stack.url}/v1/runs`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      graph: { nodes: [{ id: node, kind: 'tool', tool: 'json', args: { value: 1 } }] },
    }),
  });
  const { runId: id } = (await posted.json()) as { runId: string };
  // Waits are capped at 200 ms here: ask again until the run has ended.
  for (;;) {
    const res = await fetch(`${stack.url}/v1/runs/${id}/wait?timeoutMs=200`, { headers });
    if (res.status === 200) return (await res.json()) as { runId: string; status: string };
  }
}

afterAll(async () => {
  await stack?.close();
  await model?.close();
});

/** JSON nested `depth` levels deep, as text (a parser's recursion is what it tests). */
const deep = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);

const VALID_BODIES: Partial<Record<RouteName, unknown>> = {
  'runs.submit': { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
  'runs.signal': { ok: true },
  'runs.rerun': { from: 'a' },
  'runs.feedback': { score: -1, comment: 'bad' },
  'sessions.message': { text: 'hello', mode: 'followup' },
  'lessons.patch': { status: 'retired' },
  'secrets.put': { value: 'hunter2', hosts: ['api.example.com'] },
  'webhooks.create': { url: 'https://example.test/hook', events: ['run.finished', 'node.failed'] },
  'events.send': { name: 'order.created', payload: { total: 120 }, id: 'fuzz-1', key: 'c1' },
  'triggers.create': {
    event: 'order.created',
    filter: { path: 'payload.total', gte: 100 },
    request: { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] } },
  },
  'keys.create': { scopes: ['runs:read'], name: 'fuzz' },
  'limits.put': {
    limits: [{ name: 'fuzz', key: 'host', concurrency: 1000, rate: { requests: 1000, intervalMs: 1000 } }],
  },
};

/** A JSON value with one field replaced, removed or given a surprising value. */
const mutated = (value: unknown): fc.Arbitrary<unknown> =>
  fc
    .tuple(
      fc.constantFrom('replace', 'remove', 'proto', 'wrap'),
      fc.oneof(fc.jsonValue(), fc.string({ maxLength: 10_000 }), fc.integer(), fc.constant(null)),
    )
    .map(([how, other]) => {
      if (typeof value !== 'object' || value === null) return other;
      const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
      const [key = 'x'] = Object.keys(copy);
      if (how === 'replace') copy[key] = other;
      if (how === 'remove') delete copy[key];
      if (how === 'proto')
        return JSON.parse(
          `{"__proto__": {"polluted": true}, "constructor": {"prototype": 1}, "${key}": 1}`,
        ) as unknown;
      if (how === 'wrap') return [copy, other];
      return copy;
    });

const param = (): fc.Arbitrary<string> =>
  fc.oneof(
    fc.uuid(),
    fc.string({ maxLength: 80 }),
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.constantFrom(
      '..',
      '%00',
      '__proto__',
      'constructor',
      'a'.repeat(3000),
      'tl_0000',
      'default',
      'main.000000000000',
    ),
    fc.constant('RUN'),
  );

interface Case {
  name: RouteName;
  params: string[];
  query: [string, string][];
  key: 'root' | 'none' | 'garbage';
  contentType: string | undefined;
  body: { kind: 'json'; value: unknown } | { kind: 'raw'; text: string } | { kind: 'none' };
}

const names = Object.keys(ROUTES) as RouteName[];

const caseArb: fc.Arbitrary<Case> = fc.constantFrom(...names).chain((name) =>
  fc.record({
    name: fc.constant(name),
    params: fc.array(param(), { minLength: 3, maxLength: 3 }),
    query: fc.array(
      fc.tuple(
        fc.constantFrom('timeoutMs', 'expand', 'status', 'limit', 'after', 'day', fc.string() as never),
        fc.string({ maxLength: 40 }),
      ),
      { maxLength: 3 },
    ),
    key: fc.constantFrom('root', 'root', 'root', 'none', 'garbage'),
    contentType: fc.constantFrom(
      'application/json',
      'application/json',
      'text/plain',
      'application/x-www-form-urlencoded',
      undefined,
      'application/json; charset=utf-16',
    ),
    body: fc.oneof(
      fc.record({
        kind: fc.constant('json' as const),
        value: VALID_BODIES[name] ? mutated(VALID_BODIES[name]) : fc.jsonValue(),
      }),
      fc.record({ kind: fc.constant('json' as const), value: fc.anything({ maxDepth: 4 }) }),
      fc.record({ kind: fc.constant('json' as const), value: fc.constant(VALID_BODIES[name] ?? {}) }),
      fc.record({
        kind: fc.constant('raw' as const),
        text: fc.oneof(
          fc.string({ maxLength: 200 }),
          fc.integer({ min: 65, max: 300_000 }).map(deep),
          fc.constantFrom('{', '{"a":', 'null', '"\\ud800"', '{"a":1}{"b":2}', '\u0000'),
        ),
      }),
      fc.constant({ kind: 'none' as const }),
    ),
  }),
);

async function send(c: Case): Promise<{ status: number; contentType: string; body: string }> {
  const route = ROUTES[c.name];
  let i = 0;
  const path = route.path.replace(/:[A-Za-z]+/g, () => {
    const value = c.params[i++] ?? 'x';
    return encodeURIComponent(value === 'RUN' ? runId : value);
  });
  const query = new URLSearchParams(c.query).toString();
  const headers: Record<string, string> = {};
  if (c.key === 'root') headers.authorization = `Bearer ${ROOT}`;
  if (c.key === 'garbage') headers.authorization = 'Bearer tl_garbage';
  if (c.contentType) headers['content-type'] = c.contentType;
  const body =
    c.body.kind === 'json'
      ? (JSON.stringify(c.body.value) ?? 'null')
      : c.body.kind === 'raw'
        ? c.body.text
        : undefined;
  const gone = new AbortController();
  const res = await fetch(`${stack.url}${path}${query ? `?${query}` : ''}`, {
    method: route.method.toUpperCase(),
    headers,
    ...(body !== undefined && route.method !== 'get' ? { body } : {}),
    signal: gone.signal,
  });
  const contentType = res.headers.get('content-type') ?? '';
  if (contentType.startsWith('text/event-stream')) {
    gone.abort();
    return { status: res.status, contentType, body: '' };
  }
  return { status: res.status, contentType, body: await res.text() };
}

it(`answers ${REQUESTS} fuzzed requests without a 5xx, each refusal with {error: {code, message}}`, async () => {
  const counts = new Map<number, number>();
  // A counterexample can hold a body of megabytes: the report keeps its head.
  const short = (err: unknown): never => {
    throw new Error(String((err as Error).message).slice(0, 3000));
  };
  await fc
    .assert(
      fc.asyncProperty(caseArb, async (c) => {
        const answer = await send(c);
        counts.set(answer.status, (counts.get(answer.status) ?? 0) + 1);
        expect(answer.status, `${c.name}: ${answer.body.slice(0, 300)}`).toBeLessThan(500);
        if (answer.status >= 400) {
          expect(answer.contentType).toMatch(/^application\/json/);
          const parsed = JSON.parse(answer.body) as { error?: { code?: unknown; message?: unknown } };
          expect(typeof parsed.error?.code).toBe('string');
          expect(typeof parsed.error?.message).toBe('string');
        }
      }),
      { numRuns: REQUESTS, endOnFailure: true },
    )
    .catch(short);
  const table = [...counts].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`);
  process.stderr.write(`fuzz: ${REQUESTS} requests by status — ${table.join(', ')}\n`);

  // Still healthy: ready, and a run goes through the workers.
  expect((await fetch(`${stack.url}/readyz`)).status).toBe(200);
  expect((await runAsRoot('after')).status).toBe('succeeded');
}, 600_000);
