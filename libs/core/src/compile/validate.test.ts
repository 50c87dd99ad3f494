import { describe, expect, it } from 'vitest';
import { builtinTools } from '../tools/builtins.js';
import { parseAllowHosts } from '../tools/egress-policy.js';
import { Ceilings } from '../ceilings/ceilings.js';
import { validateGraph, type ValidationIssue } from './validate.js';

const tools = builtinTools({ egress: parseAllowHosts('') });
const tool = (id: string, args: Record<string, unknown> = { value: 1 }, extra: object = {}) => ({
  id,
  kind: 'tool',
  tool: 'json',
  args,
  ...extra,
});

function issuesOf(graph: unknown, limits?: { maxNodes: number; maxEdges: number }): ValidationIssue[] {
  const result = validateGraph(graph, { tools, ...(limits ? { limits } : {}) });
  if (result.ok) throw new Error('expected the graph to be rejected');
  return [...result.issues];
}

describe('validateGraph', () => {
  it('accepts a diamond and reports its shape', () => {
    const result = validateGraph(
      {
        nodes: [
          tool('a'),
          tool('b', { value: { $ref: 'a.output' } }),
          tool('c'),
          tool('d', { value: '{{b.output}} {{c.output}}' }),
        ],
        edges: [
          ['a', 'b'],
          ['a', 'c'],
          ['b', 'd'],
          ['c', 'd'],
        ],
      },
      { tools },
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.topology.sources).toEqual(['a']);
    expect(result.topology.sinks).toEqual(['d']);
  });

  it('reports duplicate ids with the path of the second one', () => {
    expect(issuesOf({ nodes: [tool('a'), tool('a')], edges: [] })).toContainEqual({
      path: 'nodes.1.id',
      message: 'duplicate id "a" (first at nodes.0)',
    });
  });

  it('reports unknown nodes in edges and self-edges', () => {
    const issues = issuesOf({
      nodes: [tool('a')],
      edges: [
        ['a', 'x'],
        ['a', 'a'],
      ],
    });
    expect(issues).toContainEqual({ path: 'edges.0.1', message: 'unknown node "x"' });
    expect(issues).toContainEqual({ path: 'edges.1', message: 'self-edge on "a"' });
  });

  it('names the cycle', () => {
    const issues = issuesOf({
      nodes: [tool('a'), tool('b'), tool('c')],
      edges: [
        ['a', 'b'],
        ['b', 'c'],
        ['c', 'a'],
      ],
    });
    expect(issues).toContainEqual({ path: 'edges', message: 'cycle: a → b → c → a' });
  });

  it('reports an unknown tool and lists the known ones', () => {
    expect(issuesOf({ nodes: [{ id: 'a', kind: 'tool', tool: 'nope', args: {} }] })).toContainEqual({
      path: 'nodes.0.tool',
      message: 'unknown tool "nope"; known tools: http, json, wait',
    });
  });

  it('checks args against the tool schema when they hold no references', () => {
    const issues = issuesOf({ nodes: [{ id: 'a', kind: 'tool', tool: 'http', args: { url: 'not a url' } }] });
    expect(issues.map((i) => i.path)).toContain('nodes.0.args.url');
  });

  it('leaves args with references to run time', () => {
    const result = validateGraph(
      {
        nodes: [tool('a'), { id: 'b', kind: 'tool', tool: 'http', args: { url: { $ref: 'a.output.url' } } }],
        edges: [['a', 'b']],
      },
      { tools },
    );
    expect(result.ok).toBe(true);
  });

  it('rejects references to nodes that are unknown, not ancestors, or the node itself', () => {
    const issues = issuesOf({
      nodes: [
        tool('a'),
        tool('b', { value: { $ref: 'a.output' } }),
        tool('c', { value: { nested: ['{{ghost.output}}'] } }),
        tool('d', { value: { $ref: 'd.output' } }),
      ],
      edges: [],
    });
    expect(issues).toContainEqual({
      path: 'nodes.1.args.value',
      message: 'node "b" references "a" but does not depend on it',
    });
    expect(issues).toContainEqual({
      path: 'nodes.2.args.value.nested.0',
      message: 'reference to unknown node "ghost"',
    });
    expect(issues).toContainEqual({ path: 'nodes.3.args.value', message: 'node "d" references itself' });
  });

  it('allows transitive references and input references', () => {
    const result = validateGraph(
      {
        nodes: [tool('a'), tool('b'), tool('c', { value: ['{{a.output}}', { $ref: 'input.user' }] })],
        edges: [
          ['a', 'b'],
          ['b', 'c'],
        ],
      },
      { tools },
    );
    expect(result.ok).toBe(true);
  });

  it('requires a reference to read a snapshot field', () => {
    const issues = issuesOf({
      nodes: [tool('a'), tool('b', { value: { $ref: 'a.outptu.x' } })],
      edges: [['a', 'b']],
    });
    expect(issues[0]?.path).toBe('nodes.1.args.value');
    expect(issues[0]?.message).toMatch(/must read one of output/);
  });

  it('rejects unknown kinds and lists the known ones', () => {
    const issues = issuesOf({ nodes: [{ id: 'a', kind: 'thought' }] });
    expect(issues).toContainEqual({
      path: 'nodes.0.kind',
      message: 'kind must be one of tool, llm, wait, loop, map, graph',
    });
  });

  it('rejects llm nodes when no model is configured, naming the variables to set', () => {
    const result = validateGraph(
      { nodes: [{ id: 'a', kind: 'llm', prompt: 'hi' }] },
      { tools, modelConfigured: false },
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues).toEqual([
      {
        path: 'nodes.0.kind',
        message:
          'no model is configured: set OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL (for an OpenAI-compatible server)',
      },
    ]);
  });

  it("rejects a tool outside the agent's allowlist and a missing input", () => {
    const result = validateGraph(
      {
        nodes: [
          { id: 'a', kind: 'tool', tool: 'http', args: { url: 'https://example.org' } },
          { id: 'b', kind: 'tool', tool: 'json', args: { value: { $ref: 'input.user.name' } } },
        ],
      },
      { tools, allowedTools: new Set(['json']), input: { value: { user: {} } } },
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues).toEqual([
      { path: 'nodes.0.tool', message: 'tool "http" is not allowed for this agent' },
      { path: 'nodes.1.args.value', message: "input.user.name is missing from the run's input" },
    ]);
  });

  it('rejects bad ids and unknown fields', () => {
    const issues = issuesOf({
      nodes: [{ id: 'no spaces', kind: 'tool', tool: 'json', args: { value: 1 }, extra: 1 }],
    });
    expect(issues.map((i) => i.path)).toEqual(expect.arrayContaining(['nodes.0.id']));
    expect(issues.some((i) => i.path === 'nodes.0' && /extra/.test(i.message))).toBe(true);
  });

  it('enforces the node and edge limits', () => {
    const nodes = Array.from({ length: 4 }, (_, i) => tool(`n${i}`));
    const edges = [
      ['n0', 'n1'],
      ['n1', 'n2'],
      ['n2', 'n3'],
    ];
    expect(issuesOf({ nodes, edges }, { maxNodes: 3, maxEdges: 2 })).toEqual([
      { path: 'nodes', message: '4 nodes exceed the limit of 3' },
      { path: 'edges', message: '3 edges exceed the limit of 2' },
    ]);
  });

  it('reports every problem at once', () => {
    const issues = issuesOf({
      nodes: [tool('a'), tool('a'), { id: 'c', kind: 'tool', tool: 'nope', args: {} }],
      edges: [['a', 'zz']],
    });
    expect(issues.map((i) => i.path).sort()).toEqual(['edges.0.1', 'nodes.1.id', 'nodes.2.tool']);
  });

  it('validates a 500-node chain without overflowing the stack', () => {
    const nodes = Array.from({ length: 500 }, (_, i) => tool(`n${i}`));
    const edges = nodes.slice(1).map((n, i) => [`n${i}`, n.id]);
    expect(validateGraph({ nodes, edges }, { tools }).ok).toBe(true);
  });

  it('checks loop, wait and nested graph nodes with paths into them', () => {
    const issues = issuesOf({
      nodes: [
        {
          id: 'l',
          kind: 'loop',
          body: { tool: 'nope', args: {} },
          maxIterations: 51,
          until: { path: 'x', equals: 1, gte: 2 },
        },
        { id: 'w', kind: 'wait', signal: 'has space' },
        {
          id: 'g',
          kind: 'graph',
          graph: {
            nodes: [{ id: 'in', kind: 'tool', tool: 'json', args: { value: { $ref: 'zz.output' } } }],
          },
        },
        { id: 'input', kind: 'tool', tool: 'json', args: { value: 1 } },
      ],
    });
    expect(issues.map((i) => i.path).sort()).toEqual(
      [
        'nodes.0.maxIterations',
        'nodes.0.until',
        'nodes.1.signal',
        'nodes.2.graph.nodes.0.args.value',
        'nodes.3.id',
      ].sort(),
    );
  });

  it('counts expanded nodes against the node limit', () => {
    const inner = { nodes: [tool('a'), tool('b')], edges: [] };
    const result = validateGraph(
      { nodes: [{ id: 'g', kind: 'graph', graph: inner }] },
      { tools, limits: { maxNodes: 3, maxEdges: 10 } },
    );
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.issues[0]?.message).toMatch(/4 nodes \(nested graphs expanded\) exceed the limit of 3/);
  });

  it('refuses a model the run may not call, at the field that names it, nested graphs and agents included', () => {
    const models = new Ceilings({
      agents: {},
      agentTools: {},
      tenants: {},
      modelsAllow: ['small'],
      defaultModel: 'small',
      budget: {},
    }).models('default', 'main');
    const llm = (id: string, model?: string) => ({
      id,
      kind: 'llm',
      prompt: 'p',
      ...(model ? { model } : {}),
    });
    const result = validateGraph(
      {
        nodes: [
          llm('a', 'small'),
          llm('b', 'huge'),
          { id: 'g', kind: 'graph', graph: { nodes: [llm('c', 'huge')] } },
          { id: 'l', kind: 'loop', maxIterations: 2, body: { agent: { prompt: 'p', model: 'huge' } } },
          llm('d'),
        ],
      },
      { tools, models },
    );
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.issues.map((i) => i.path)).toEqual([
        'nodes.1.model',
        'nodes.2.graph.nodes.0.model',
        'nodes.3.body.agent.model',
      ]);
  });
});

describe('secrets in graphs', () => {
  const http = (id: string, args: Record<string, unknown>) => ({ id, kind: 'tool', tool: 'http', args });
  const url = 'https://api.example.org/x';

  it('accepts {"$secret"} as a whole value anywhere in a tool call\'s args, in loops and nested graphs', () => {
    const result = validateGraph(
      {
        nodes: [
          http('a', {
            url,
            headers: { Authorization: { $secret: 'API_TOKEN' }, 'X-Api-Key': { $secret: 'KEY' } },
            query: { sig: { $secret: 'SIG' } },
            json: { deep: [{ pw: { $secret: 'PW' } }] },
          }),
          {
            id: 'l',
            kind: 'loop',
            maxIterations: 2,
            body: { tool: 'http', args: { url, headers: { Cookie: { $secret: 'SESSION' } } } },
          },
          {
            id: 'g',
            kind: 'graph',
            graph: { nodes: [http('inner', { url, headers: { authorization: { $secret: 'T' } } })] },
          },
        ],
      },
      { tools },
    );
    expect(result.ok).toBe(true);
  });

  it('refuses a malformed {"$secret"}, naming the exact field', () => {
    const issues = issuesOf({
      nodes: [
        http('a', { url, headers: { Authorization: { $secret: 'API_TOKEN', extra: 1 } } }),
        http('b', { url, json: { list: [{ $secret: 'bad-name' }] } }),
      ],
    });
    expect(issues.map((i) => i.path)).toEqual([
      'nodes.0.args.headers.Authorization',
      'nodes.1.args.json.list.0',
    ]);
    expect(issues[0]!.message).toMatch(/whole value/);
  });

  it('refuses {"$secret"} outside a tool call\'s args', () => {
    const issues = issuesOf({
      nodes: [{ id: 'g', kind: 'graph', input: { t: { $secret: 'T' } }, graph: { nodes: [tool('x')] } }],
    });
    expect(issues).toEqual([{ path: 'nodes.0.input.t', message: expect.stringMatching(/tool call's args/) }]);
  });

  it('refuses credential headers written in clear, in any case, pointing to $secret', () => {
    const issues = issuesOf({
      nodes: [
        http('a', {
          url,
          headers: {
            authorization: 'Bearer abc',
            COOKIE: 'sid=1',
            'Proxy-Authorization': 'Basic x',
            'X-Api-Key': 'k',
            'X-Auth-Token': 't',
            accept: 'application/json',
            'Idempotency-Key': 'mine',
          },
        }),
        {
          id: 'l',
          kind: 'loop',
          maxIterations: 1,
          body: { tool: 'http', args: { url, headers: { Authorization: 'Bearer {{input.x}}x' } } },
        },
        {
          id: 'm',
          kind: 'loop',
          maxIterations: 1,
          body: { tool: 'http', args: { url, headers: { Authorization: 'Bearer abc' } } },
        },
      ],
    });
    expect(issues.map((i) => i.path)).toEqual([
      'nodes.0.args.headers.authorization',
      'nodes.0.args.headers.COOKIE',
      'nodes.0.args.headers.Proxy-Authorization',
      'nodes.0.args.headers.X-Api-Key',
      'nodes.0.args.headers.X-Auth-Token',
      'nodes.2.body.args.headers.Authorization',
    ]);
    expect(issues[0]!.message).toMatch(/\$secret/);
  });
});

describe('retry variants in graphs', () => {
  it('check each override against its upstream, and let a secret stand in its args', () => {
    const fetchNode = (vary: unknown[]) => ({
      id: 'b',
      kind: 'tool',
      tool: 'http',
      args: { url: 'https://a.example/x' },
      retry: { vary },
    });
    const ok = validateGraph(
      {
        nodes: [
          tool('a'),
          fetchNode([
            {
              args: {
                url: 'https://mirror.example/{{a.output}}',
                headers: { Authorization: { $secret: 'T' } },
              },
            },
          ]),
        ],
        edges: [['a', 'b']],
      },
      { tools },
    );
    expect(ok.ok).toBe(true);
    // A reference in an override reads a node like any other: only one the node depends on.
    expect(
      issuesOf({ nodes: [tool('a'), fetchNode([{ args: { url: 'https://m.example/{{a.output}}' } }])] }),
    ).toEqual([
      expect.objectContaining({
        path: 'nodes.1.retry.vary.0.args.url',
        message: 'node "b" references "a" but does not depend on it',
      }),
    ]);
  });

  it('are what a validation retry needs: never the same arguments again', () => {
    const node = (retry: unknown) => ({ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 }, retry });
    expect(issuesOf({ nodes: [node({ validation: 2, vary: [{ args: { value: 2 } }] })] })).toEqual([
      expect.objectContaining({
        path: 'nodes.0.retry.validation',
        message: expect.stringMatching(/only with different arguments: give "vary" at least 2/),
      }),
    ]);
    expect(issuesOf({ nodes: [node({ validation: 1 })] })[0]?.path).toBe('nodes.0.retry.validation');
    expect(
      validateGraph({ nodes: [node({ validation: 1, vary: [{ args: { value: 2 } }] })] }, { tools }).ok,
    ).toBe(true);
  });

  it('refuse them on kinds that do not vary', () => {
    const loop = {
      id: 'l',
      kind: 'loop',
      body: { tool: 'json', args: { value: 1 } },
      until: { path: 'output', exists: true },
      maxIterations: 2,
      retry: { vary: [{ maxIterations: 3 }] },
    };
    expect(issuesOf({ nodes: [loop] })).toEqual([
      { path: 'nodes.0.retry.vary', message: 'only tool and llm nodes vary their retries' },
    ]);
  });
});
