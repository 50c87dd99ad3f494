/**
 * The node-kind table: every kind is in it, under its own name, and everything that depends on a
 * kind is read from its entry. Adding a kind fails to compile here until it has a sample below.
 */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { validateGraph } from '@tetraloop/core/compile';
import {
  NODE_KINDS,
  executionOf,
  expansionOf,
  isExecutable,
  kindHas,
  kindsWith,
  mapReferenceFields,
  referenceFields,
  type GraphNode,
  type NodeKind,
} from '@tetraloop/core/nodes';
import { PLANNER_PROMPT_VERSION, plannerMessages, PLANNER_SCHEMA } from '@tetraloop/core/planning';
import { DEFAULT_RETRIES } from '@tetraloop/core/policy';
import { nodeJobAttempts } from '@tetraloop/core/queues';
import { builtinTools, parseAllowHosts } from '@tetraloop/core/tools';

/** One node of each kind, with a reference in every field that may hold one. */
const SAMPLES: { readonly [K in NodeKind]: Extract<GraphNode, { kind: K }> } = {
  tool: { id: 't', kind: 'tool', tool: 'json', args: { value: { $ref: 'a.output' } }, onError: 'continue' },
  llm: { id: 'l', kind: 'llm', prompt: 'sum {{a.output}}', system: 'be {{a.output.tone}}' },
  wait: { id: 'w', kind: 'wait', signal: 'go', timeoutSeconds: 10, onTimeout: 'continue' },
  loop: {
    id: 'p',
    kind: 'loop',
    body: { tool: 'json', args: { value: '{{a.output}}' } },
    maxIterations: 2,
    intervalMs: 0,
    onError: 'replan',
  },
  map: {
    id: 'm',
    kind: 'map',
    over: { $ref: 'a.output.list' },
    node: { kind: 'tool', tool: 'json', args: { value: { n: '{{index}}', v: { $ref: 'item.v' } } } },
    concurrency: 2,
    maxItems: 10,
    onItemError: 'continue',
  },
  graph: {
    id: 'g',
    kind: 'graph',
    graph: { nodes: [{ id: 'x', kind: 'tool', tool: 'json', args: { value: 1 } }], edges: [] },
    input: { v: { $ref: 'a.output' } },
  },
};

const tools = builtinTools({ egress: parseAllowHosts('') });

describe('the node-kind table', () => {
  it('lists every kind, each under its own name', () => {
    expect(Object.keys(NODE_KINDS)).toEqual(['tool', 'llm', 'wait', 'loop', 'map', 'graph']);
    for (const [name, spec] of Object.entries(NODE_KINDS)) expect(spec.kind).toBe(name);
  });

  it('parses and validates a node of each kind with its own schema and checks', () => {
    for (const node of Object.values(SAMPLES)) {
      expect(NODE_KINDS[node.kind].schema.safeParse(node).success).toBe(true);
      const graph = {
        nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: { tone: 'brief' } } }, node],
        edges: [['a', node.id]],
      };
      const result = validateGraph(graph, { tools });
      expect(result.ok, `${node.kind}: ${JSON.stringify(!result.ok && result.issues)}`).toBe(true);
    }
  });

  it('names the fields that may hold references, and maps only those', () => {
    const fields = Object.fromEntries(
      Object.values(SAMPLES).map((n) => [n.kind, referenceFields(n).map((f) => f.path.join('.'))]),
    );
    expect(fields).toEqual({
      tool: ['args'],
      llm: ['prompt', 'system'],
      wait: [],
      loop: ['body.args'],
      map: ['over', 'node'],
      graph: ['input'],
    });
    const mapped = mapReferenceFields(SAMPLES.llm, (v) => `<${String(v)}>`);
    expect(mapped).toEqual({
      ...SAMPLES.llm,
      prompt: '<sum {{a.output}}>',
      system: '<be {{a.output.tone}}>',
    });
    expect(SAMPLES.llm.prompt).toBe('sum {{a.output}}');
  });

  it('declares every trait of every kind, in one table', () => {
    const traitsOf = (n: GraphNode): (boolean | null)[] => {
      const spec = NODE_KINDS[n.kind];
      const run = isExecutable(n) ? executionOf(n) : undefined;
      return [
        spec.planner !== undefined,
        expansionOf(n) !== undefined,
        spec.variesOnRetry,
        spec.mayBeFallback,
        spec.replansInWindow,
        run ? run.retryable : null,
        run ? run.mayRunHandedOff : null,
        run && isExecutable(n) ? run.declaredToolCall(n) !== undefined : null,
        run ? run.chargesToolCall : null,
        run ? run.usesToolTime : null,
      ];
    };
    const table = Object.fromEntries(Object.values(SAMPLES).map((n) => [n.kind, traitsOf(n)]));
    // null: the kind never executes (it expands before the run).
    // prettier-ignore
    expect(table).toEqual({
      //      planner expands variesOnRetry mayBeFallback replansInWindow retryable mayRunHandedOff declaredToolCall chargesToolCall usesToolTime
      tool:  [true,   false,  true,         true,         true,           true,     true,           true,            true,           true ],
      llm:   [true,   false,  true,         true,         true,           true,     true,           false,           false,          true ],
      wait:  [false,  false,  false,        false,        false,          false,    false,          false,           false,          false],
      loop:  [false,  false,  false,        false,        false,          true,     false,          false,           false,          true ],
      map:   [true,   false,  false,        false,        true,           false,    false,          false,           false,          false],
      graph: [false,  true,   false,        false,        false,          null,     null,           null,            null,           null ],
    });
    expect(executionOf(SAMPLES.tool).declaredToolCall(SAMPLES.tool)).toEqual({
      tool: 'json',
      args: { value: { $ref: 'a.output' } },
    });
    // What validation's messages name, and how a raw node's kind is read before it is validated.
    expect(kindsWith('variesOnRetry')).toEqual(['tool', 'llm']);
    expect(kindsWith('mayBeFallback')).toEqual(['tool', 'llm']);
    expect(kindsWith('replansInWindow')).toEqual(['tool', 'llm', 'map']);
    expect([kindHas('llm', 'mayBeFallback'), kindHas('wait', 'mayBeFallback')]).toEqual([true, false]);
    expect([kindHas('toString', 'mayBeFallback'), kindHas(undefined, 'replansInWindow')]).toEqual([
      false,
      false,
    ]);
  });

  it('says for each executable kind how it retries, charges, limits, labels and fails', () => {
    const facts = Object.fromEntries(
      Object.values(SAMPLES)
        .filter(isExecutable)
        .map((n) => {
          const k = executionOf(n);
          return [
            n.kind,
            {
              attempts: nodeJobAttempts(n, DEFAULT_RETRIES),
              chargesToolCall: k.chargesToolCall,
              usesToolTime: k.usesToolTime,
              defaultTimeout: k.defaultTimeout,
              label: k.label(n),
              continues: k.continuesOnFailure(n),
              replans: k.replansOnFailure(n),
            },
          ];
        }),
    );
    const maxAttempts = 1 + Math.max(...Object.values(DEFAULT_RETRIES));
    expect(facts).toEqual({
      tool: {
        attempts: maxAttempts,
        chargesToolCall: true,
        usesToolTime: true,
        defaultTimeout: 'tool',
        label: 'json',
        continues: true,
        replans: false,
      },
      llm: {
        attempts: maxAttempts,
        chargesToolCall: false,
        usesToolTime: true,
        defaultTimeout: 'model',
        label: 'llm',
        continues: false,
        replans: false,
      },
      wait: {
        attempts: 1,
        chargesToolCall: false,
        usesToolTime: false,
        defaultTimeout: 'per-call',
        label: 'wait',
        continues: true,
        replans: false,
      },
      loop: {
        attempts: maxAttempts,
        chargesToolCall: false,
        usesToolTime: true,
        defaultTimeout: 'per-call',
        label: 'json',
        continues: false,
        replans: true,
      },
      map: {
        attempts: 1,
        chargesToolCall: false,
        usesToolTime: false,
        defaultTimeout: 'per-call',
        label: 'map',
        continues: false,
        replans: false,
      },
    });
  });

  it('reads the reference fields of every kind of loop body, and charges loops per iteration', () => {
    const loop = (body: unknown): GraphNode =>
      ({ id: 'p', kind: 'loop', body, maxIterations: 2, intervalMs: 0 }) as GraphNode;
    const paths = (n: GraphNode): string[] => referenceFields(n).map((f) => f.path.join('.'));
    expect(paths(loop({ graph: { nodes: [], edges: [] }, input: { $ref: 'a.output' } }))).toEqual([
      'body.input',
    ]);
    expect(paths(loop({ agent: { prompt: '{{a.output}}', system: 'be brief' } }))).toEqual([
      'body.agent.prompt',
      'body.agent.system',
    ]);
    const snapshot = {
      status: 'succeeded' as const,
      attempts: [{ attempt: 1, startedAt: '', finishedAt: '', durationMs: 7, worker: 'w' }],
      finishedAt: '',
      durationMs: 7,
      usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7, modelCalls: 1 },
    };
    expect(executionOf(SAMPLES.loop).charge(snapshot)).toEqual({});
    expect(executionOf(SAMPLES.tool).charge(snapshot)).toEqual({ toolTimeMs: 7 });
    // A call without a price is counted as one; a priced one charges its cost in nano-dollars.
    expect(executionOf(SAMPLES.llm).charge(snapshot)).toEqual({
      promptTokens: 3,
      completionTokens: 4,
      modelCalls: 1,
      unpricedModelCalls: 1,
    });
    expect(
      executionOf(SAMPLES.llm).charge({ ...snapshot, usage: { ...snapshot.usage, costUsd: 0.0000123 } }),
    ).toEqual({ promptTokens: 3, completionTokens: 4, modelCalls: 1, costNanoUsd: 12_300 });
    expect(executionOf(SAMPLES.wait).charge(snapshot)).toEqual({});
    expect(
      executionOf({ ...SAMPLES.tool, timeoutMs: 500 }).timeoutMs({ ...SAMPLES.tool, timeoutMs: 500 }),
    ).toBe(500);
    expect(executionOf(SAMPLES.wait).timeoutMs(SAMPLES.wait)).toBeUndefined();
  });

  it('pins the planner prompt its version names: a change to the kinds the planner may write needs a new version', () => {
    const rules = Object.values(NODE_KINDS).flatMap((k) => (k.planner ? [k.planner.rule] : []));
    const system = plannerMessages({ task: 't', catalog: { tools: [], version: 'v' }, workspace: [] })[0]!
      .content!;
    for (const rule of rules) expect(system).toContain(rule);
    const digest = createHash('sha256')
      .update(JSON.stringify([system, PLANNER_SCHEMA]))
      .digest('hex')
      .slice(0, 12);
    // If this fails, the planner's prompt or schema changed: bump PLANNER_PROMPT_VERSION, then this pair.
    expect({ version: PLANNER_PROMPT_VERSION, digest }).toEqual({
      version: 'planner-v5',
      digest: '0268e817ae35',
    });
  });

  it('expands only nested graphs, and lets the planner write only the kinds that say how', () => {
    expect(
      Object.values(SAMPLES)
        .filter((n) => expansionOf(n))
        .map((n) => n.kind),
    ).toEqual(['graph']);
    expect(
      Object.values(SAMPLES)
        .filter((n) => !isExecutable(n))
        .map((n) => n.kind),
    ).toEqual(['graph']);
    const planned = Object.values(NODE_KINDS)
      .filter((k) => k.planner)
      .map((k) => k.kind);
    expect(planned).toEqual(['tool', 'llm', 'map']);
    const schema = JSON.stringify(PLANNER_SCHEMA);
    for (const kind of planned) expect(schema).toContain(`"const":"${kind}"`);
  });
});
