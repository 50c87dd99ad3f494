/**
 * The graph builder of `@tetraloop/client` checks a graph without the server's code (the client is
 * bundled for browsers and imports none of it), so its checks are held to the API's own here: each
 * graph below is given to `g.build()` and to `validateGraph` (what `POST /v1/runs` runs), with the
 * built-in tools and the custom tool the builder was given, and both must agree — the same graphs
 * accepted, the same paths refused.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { GraphBuildError, graph, type GraphBuilder } from '@tetraloop/client';
import { validateGraph } from '@tetraloop/core/compile';
import { builtinTools, defineCustomTool, parseAllowHosts, toolRegistry } from '@tetraloop/core/tools';

/** What `defineTool` of `@tetraloop/sdk` makes (it is this function): a `CustomTool<I, O>`. */
const lookupCustomer = defineCustomTool({
  name: 'crm.lookup',
  description: 'Finds a customer by email.',
  input: z.object({ email: z.string().email() }),
  output: z.object({ name: z.string(), plan: z.enum(['free', 'pro']) }),
  run: () => ({ name: 'Ada', plan: 'pro' as const }),
});

const tools = toolRegistry([
  ...builtinTools({ egress: parseAllowHosts(undefined) }).values(),
  lookupCustomer,
]);
const apiCheck = (raw: unknown, input?: unknown) =>
  validateGraph(raw, {
    tools,
    modelConfigured: true,
    ...(input !== undefined ? { input: { value: input } } : {}),
  });

const sortedPaths = (issues: readonly { path: string }[]): string[] => issues.map((i) => i.path).sort();

/** Builds with `declare`; the API must refuse what the builder refuses, at the same paths. */
function expectSameVerdict(declare: (g: GraphBuilder) => void): string[] {
  const g = graph();
  declare(g);
  let built: unknown;
  try {
    built = g.build();
  } catch (err) {
    if (!(err instanceof GraphBuildError)) throw err;
    const api = apiCheck(err.graph);
    expect(api.ok, 'the API accepts a graph the builder refused').toBe(false);
    if (!api.ok) expect(sortedPaths(err.issues)).toEqual(sortedPaths(api.issues));
    return sortedPaths(err.issues);
  }
  const api = apiCheck(built);
  expect(api.ok ? [] : api.issues).toEqual([]);
  return [];
}

describe('g.build() agrees with the API’s validation', () => {
  it('on the issue’s example, a tool from defineTool and an llm node', () => {
    const g = graph<{ email: string }>();
    const c = g.tool('customer', lookupCustomer, { email: g.input('email') });
    // @ts-expect-error: the output of crm.lookup has no `nmae`
    void c.out.nmae;
    g.llm('note', { prompt: g.text`Write a welcome note to ${c.out.name} (${c.out.plan} plan).` });
    const built = g.build();
    expect(apiCheck(built, { email: 'ada@example.com' })).toMatchObject({ ok: true });
    // The API checks the run's input, which the builder does not have.
    expect(apiCheck(built, {})).toMatchObject({
      ok: false,
      issues: [{ path: 'nodes.0.args.email', message: "input.email is missing from the run's input" }],
    });
  });

  it('on valid graphs', () => {
    expect(
      expectSameVerdict((g) => {
        const c = g.tool('customer', lookupCustomer, { email: 'ada@example.com' });
        const page = g.tool(
          'page',
          'http',
          { url: 'https://example.org/x' },
          { timeoutMs: 5000, priority: 9 },
        );
        g.tool('pack', 'json', { value: [c.out.name, page.out.body!.id!, 'x {{customer.output.plan}}'] });
        g.llm('sum', { prompt: 'Sum it up', system: 'Be brief', retry: { network: 1 } });
        g.tool('last', 'wait', { ms: 10 }, { dependsOn: ['sum', c], onError: 'continue' });
      }),
    ).toEqual([]);
  });

  it('on a cycle made with dependsOn', () => {
    expect(
      expectSameVerdict((g) => {
        const a = g.tool('a', 'wait', { ms: 10 }, { dependsOn: ['b'] });
        g.tool('b', 'json', { value: a.out });
      }),
    ).toEqual(['edges']);
  });

  it('on unknown tools, args that fail a schema, and ids', () => {
    expect(
      expectSameVerdict((g) => {
        g.tool('a', 'htp' as 'http', {});
        g.tool('b', lookupCustomer, { email: 'not an email' });
        g.tool('b', 'json', { value: 1 });
        g.tool('input', 'json', { value: 1 });
        g.tool('no way', 'json', { value: 1 });
      }),
    ).toEqual(['nodes.0.tool', 'nodes.1.args.email', 'nodes.2.id', 'nodes.3.id', 'nodes.4.id']);
  });

  it('on fields out of bounds', () => {
    expect(
      expectSameVerdict((g) => {
        g.tool('a', 'json', { value: 1 }, { priority: 11, timeoutMs: 600_001, retry: { server: 11 } });
        g.llm('b', { prompt: '', model: '', timeoutMs: 0, priority: 0 });
        g.llm('c', { prompt: 'x'.repeat(200_001), system: 'y'.repeat(200_001) });
      }),
    ).toEqual([
      'nodes.0.priority',
      'nodes.0.retry.server',
      'nodes.0.timeoutMs',
      'nodes.1.model',
      'nodes.1.priority',
      'nodes.1.prompt',
      'nodes.1.timeoutMs',
      'nodes.2.prompt',
      'nodes.2.system',
    ]);
  });

  it('on dependsOn naming an unknown node or the node itself', () => {
    expect(
      expectSameVerdict((g) => {
        g.tool('a', 'json', { value: 1 }, { dependsOn: ['ghost'] });
        g.tool('b', 'json', { value: 1 }, { dependsOn: ['b'] });
      }),
    ).toEqual(['edges.0.0', 'edges.1']);
  });

  it('on references written by hand', () => {
    expect(
      expectSameVerdict((g) => {
        g.tool('a', 'json', { value: 1 });
        g.tool('b', 'json', { x: { $ref: 'zz.output' }, y: '{{b.output}}', z: '{{a.body}}' });
        g.llm('c', { prompt: 'About {{a.output.x}}', system: '{{nope.status}}' });
      }),
    ).toEqual(['nodes.1.args.x', 'nodes.1.args.y', 'nodes.1.args.z', 'nodes.2.system']);
  });

  it('on an empty graph', () => {
    expect(expectSameVerdict(() => undefined)).toEqual(['nodes']);
  });
});
