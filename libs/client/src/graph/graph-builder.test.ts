import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { GraphBuildError, graph, type ToolLike } from '../index.js';

const lookupCustomer = {
  name: 'crm.lookup',
  input: z.object({ email: z.string().email() }),
  output: z.object({
    name: z.string(),
    plan: z.enum(['free', 'pro']),
    orders: z.array(z.object({ id: z.string(), total: z.number() })),
  }),
} satisfies ToolLike;

/** The issues `build()` throws with, or fails the test. */
function issuesOf(build: () => unknown): { path: string; message: string }[] {
  try {
    build();
  } catch (err) {
    expect(err).toBeInstanceOf(GraphBuildError);
    const error = err as GraphBuildError;
    expect(error.code).toBe('invalid_graph');
    return [...error.issues];
  }
  throw new Error('build() did not throw');
}

describe('graph()', () => {
  it('builds the JSON graph of the issue’s example, the edge inferred from a reference', () => {
    const g = graph();
    const c = g.tool('customer', lookupCustomer, { email: g.input('email') });
    g.llm('note', { prompt: g.text`Write a welcome note to ${c.out.name} (${c.out.plan} plan).` });
    expect(g.build()).toEqual({
      nodes: [
        { id: 'customer', kind: 'tool', tool: 'crm.lookup', args: { email: { $ref: 'input.email' } } },
        {
          id: 'note',
          kind: 'llm',
          prompt: 'Write a welcome note to {{customer.output.name}} ({{customer.output.plan}} plan).',
        },
      ],
      edges: [['customer', 'note']],
    });
  });

  it('writes nested paths, indexes and references deep in args; one edge per pair', () => {
    const g = graph();
    const c = g.tool('customer', lookupCustomer, { email: 'ada@example.com' });
    const page = g.tool('page', 'http', { url: 'https://example.org/x' });
    g.tool(
      'pack',
      'json',
      {
        value: {
          first: c.out.orders[0]!.id,
          totals: [c.out.orders[1]!.total, 7],
          title: page.out.body!.items![2]!.title!,
          note: 'Dear {{customer.output.name}}',
        },
      },
      { dependsOn: [c, 'page'], timeoutMs: 5000, retry: { network: 2 }, onError: 'continue', priority: 8 },
    );
    const built = g.build();
    expect(built.nodes[2]).toEqual({
      id: 'pack',
      kind: 'tool',
      tool: 'json',
      args: {
        value: {
          first: { $ref: 'customer.output.orders.0.id' },
          totals: [{ $ref: 'customer.output.orders.1.total' }, 7],
          title: { $ref: 'page.output.body.items.2.title' },
          note: 'Dear {{customer.output.name}}',
        },
      },
      timeoutMs: 5000,
      retry: { network: 2 },
      onError: 'continue',
      priority: 8,
    });
    expect(built.edges).toEqual([
      ['customer', 'pack'],
      ['page', 'pack'],
    ]);
  });

  it('orders a node after another with dependsOn, by handle or by id', () => {
    const g = graph();
    const a = g.tool('a', 'wait', { ms: 10 });
    g.tool('b', 'wait', { ms: 10 }, { dependsOn: [a] });
    g.tool('c', 'wait', { ms: 10 }, { dependsOn: ['b', 'a'] });
    expect(g.build().edges).toEqual([
      ['a', 'b'],
      ['b', 'c'],
      ['a', 'c'],
    ]);
  });

  it('infers edges from references written by hand, too', () => {
    const g = graph();
    g.tool('a', 'json', { value: 1 });
    g.tool('b', 'json', { value: { $ref: 'a.output' }, note: 'and {{ a.status }}' });
    g.llm('c', { prompt: 'About {{b.output.note}}', system: 'Run input: {{input.x}}' });
    expect(g.build().edges).toEqual([
      ['a', 'b'],
      ['b', 'c'],
    ]);
  });

  it('answers a fresh copy on every build, and builds again after more nodes', () => {
    const g = graph();
    g.tool('a', 'wait', { ms: 10 });
    const first = g.build();
    (first.nodes[0] as unknown as { args: { ms: number } }).args.ms = 99;
    g.tool('b', 'wait', { ms: 20 });
    const second = g.build();
    expect(second.nodes).toHaveLength(2);
    expect(second.nodes[0]).toMatchObject({ args: { ms: 10 } });
  });

  it('reads the run’s input whole or by field, in args and in text', () => {
    const g = graph<{ user: { email: string } }>();
    g.tool('echo', 'json', { value: g.input(), email: g.input('user').email });
    g.llm('hi', { prompt: g.text`Hello ${g.input('user').email}, ${3} ${true}` });
    const [echo, hi] = g.build().nodes;
    expect(echo).toMatchObject({ args: { value: { $ref: 'input' }, email: { $ref: 'input.user.email' } } });
    expect(hi).toMatchObject({ prompt: 'Hello {{input.user.email}}, 3 true' });
  });

  it('tells a reference from a value where one is used as text', () => {
    const c = graph().tool('customer', lookupCustomer, { email: 'ada@example.com' });
    expect(() => `${c.out.name as unknown as string}`).toThrow(
      /customer\.output\.name is a reference.*g\.text/,
    );
  });
});

describe('g.build() checks', () => {
  it('refuses a cycle made with dependsOn', () => {
    const g = graph();
    const a = g.tool('a', 'wait', { ms: 10 }, { dependsOn: ['b'] });
    g.tool('b', 'json', { value: a.out });
    expect(issuesOf(() => g.build())).toEqual([{ path: 'edges', message: 'cycle: a → b → a' }]);
  });

  it('refuses an unknown tool name, at its path', () => {
    const g = graph();
    g.tool('ok', 'json', { value: 1 });
    g.tool('nope', 'htp' as 'http', { url: 'https://example.org' });
    expect(issuesOf(() => g.build())).toEqual([
      { path: 'nodes.1.tool', message: 'unknown tool "htp"; known tools: http, json, wait, mcp.*' },
    ]);
  });

  it('checks args without references against the tool’s input schema', () => {
    const g = graph();
    g.tool('bad', lookupCustomer, { email: 'not an email' });
    g.tool('later', lookupCustomer, { email: g.input('email') });
    expect(issuesOf(() => g.build())).toEqual([
      { path: 'nodes.0.args.email', message: expect.stringMatching(/email/i) },
    ]);
  });

  it('checks a secret in args as a string, as the API does', () => {
    const g = graph();
    g.tool(
      'mail',
      { ...lookupCustomer, input: z.object({ token: z.string() }) },
      {
        token: { $secret: 'MAIL_TOKEN' } as unknown as string,
      },
    );
    expect(g.build().nodes[0]).toMatchObject({ args: { token: { $secret: 'MAIL_TOKEN' } } });
  });

  it('reports every problem at once, each at its path', () => {
    const other = graph().tool('x', 'json', { value: 1 });
    const g = graph();
    const a = g.tool('a', 'json', { value: 1 }, { priority: 11, retry: { server: 12 } });
    g.tool('a', 'json', { value: a.out }, { dependsOn: ['ghost', other] });
    g.tool('input', 'json', { value: other.out, text: 'from {{zz.output}} and {{a.body}}' });
    g.llm('empty', { prompt: '', timeoutMs: 0 });
    g.tool('bad id!', 'json', { value: a.out['with.dot'] });
    expect(issuesOf(() => g.build())).toEqual([
      { path: 'nodes.1.id', message: 'duplicate id "a" (first at nodes.0)' },
      { path: 'nodes.2.id', message: '"input" is reserved' },
      { path: 'nodes.4.id', message: 'must match [A-Za-z0-9_-]{1,64}' },
      { path: 'nodes.0.priority', message: 'must be an integer from 1 to 10' },
      { path: 'nodes.0.retry.server', message: 'must be an integer from 0 to 10' },
      { path: 'nodes.1.dependsOn.1', message: 'depends on node "x" of another graph' },
      { path: 'nodes.1.args.value', message: 'node "a" references itself' },
      { path: 'nodes.2.args.value', message: 'references node "x" of another graph' },
      { path: 'nodes.2.args.value', message: 'reference to unknown node "x"' },
      { path: 'nodes.2.args.text', message: 'reference to unknown node "zz"' },
      {
        path: 'nodes.2.args.text',
        message: 'reference "a.body" must read one of output, error, status, attempts, durationMs',
      },
      { path: 'nodes.3.timeoutMs', message: 'must be an integer from 1 to 600000' },
      { path: 'nodes.3.prompt', message: 'must be 1 to 200000 characters long' },
      { path: 'nodes.4.args.value', message: expect.stringContaining('"with.dot" of a.output.with.dot') },
      { path: 'edges.1.0', message: 'unknown node "ghost" (in dependsOn of "a")' },
    ]);
  });

  it('refuses an empty graph, and carries the graph it refused', () => {
    const error = (() => {
      try {
        graph().build();
      } catch (err) {
        return err as GraphBuildError;
      }
    })();
    expect(error?.issues).toEqual([{ path: 'nodes', message: 'a graph needs at least one node' }]);
    expect(error?.graph).toEqual({ nodes: [], edges: [] });
    expect(error?.message).toBe('the graph is invalid: nodes: a graph needs at least one node');
  });

  it('refuses in g.text a reference to another graph’s node, or one a string cannot hold', () => {
    const other = graph().tool('x', 'json', { value: 1 });
    const g = graph();
    const a = g.tool('a', 'json', { value: 1 });
    expect(() => g.text`${other.out}`).toThrow(/x\.output references a node of another graph/);
    expect(() => g.text`${a.out['first name']!}`).toThrow(/"first name" of a\.output\.first name/);
  });
});
