/**
 * What `g.build()` checks, before a request is sent: the API's static checks (docs/api.md, "Static
 * validation") that need nothing of a deployment, with the same paths (`nodes.1.args.email`).
 * What only a deployment knows — the tools it serves beyond the built-in ones, its models and
 * limits, the run's input — the API checks when the run is submitted. The edges are inferred here,
 * from every reference a node makes (a typed `Ref` or a `{{…}}` written by hand), plus `dependsOn`.
 * `test/graph-builder-parity.test.ts` holds these checks to the API's own, graph by graph.
 */
import type { ApiIssue, Graph } from '../types.js';
import type { NodeProblem } from './to-json.js';
import type { ToolLike } from './tool-like.js';

/** A node as the builder declared it, before the graph is checked. */
export interface DeclaredNode {
  /** The node's JSON, references written in. */
  readonly json: Readonly<Record<string, unknown>> & { readonly id: string; readonly kind: 'tool' | 'llm' };
  /** The tool it calls, when given as a tool: its input schema checks the args. */
  readonly tool?: ToolLike;
  /** Ids of the nodes it runs after, beyond those it references. */
  readonly dependsOn: readonly string[];
  /** What could not be written into its JSON. */
  readonly problems: readonly NodeProblem[];
}

/** The tools every deployment has, and the prefix of MCP servers' tools (the API checks those). */
export const BUILTIN_TOOLS = ['http', 'json', 'wait'] as const;
export type BuiltinToolName = (typeof BUILTIN_TOOLS)[number];
const MCP_PREFIX = 'mcp.';

const NODE_ID = /^[A-Za-z0-9_-]{1,64}$/;
const RESERVED_IDS = new Set(['input']);
const SNAPSHOT_FIELDS = ['output', 'error', 'status', 'attempts', 'durationMs'];
const TEMPLATE = /\{\{\s*([^{}\s]+)\s*\}\}/g;
const RETRY_CLASSES = ['network', 'timeout', 'rate_limited', 'server', 'auth', 'validation', 'internal'];
/** The fields of a node that may hold references, by kind (the API's `referenceFields`). */
const REFERENCE_FIELDS = {
  tool: [['args'], ['retry', 'vary'], ['fallback']],
  llm: [['prompt'], ['system'], ['retry', 'vary'], ['fallback']],
} as const;
/** Bounds of the fields the builder sets: [field, min, max], lengths for strings. */
const BOUNDS = {
  tool: [
    ['priority', 1, 10],
    ['timeoutMs', 1, 600_000],
  ],
  llm: [
    ['priority', 1, 10],
    ['timeoutMs', 1, 600_000],
    ['prompt', 1, 200_000],
    ['system', 0, 200_000],
    ['model', 1, 200],
  ],
} as const;

export interface CompiledGraph {
  readonly graph: Graph;
  readonly issues: readonly ApiIssue[];
}

/** The graph of `declared`, its edges inferred, and every problem the checks found. */
export function compileGraph(declared: readonly DeclaredNode[], tools: ReadonlySet<string>): CompiledGraph {
  const issues: ApiIssue[] = [];
  const issue = (path: readonly (string | number)[], message: string): number =>
    issues.push({ path: path.join('.'), message });
  if (declared.length === 0) issue(['nodes'], 'a graph needs at least one node');

  const firstIndex = new Map<string, number>();
  declared.forEach(({ json: { id } }, i) => {
    if (!NODE_ID.test(id)) {
      issue(['nodes', i, 'id'], 'must match [A-Za-z0-9_-]{1,64}');
      return;
    }
    const first = firstIndex.get(id);
    if (RESERVED_IDS.has(id)) issue(['nodes', i, 'id'], `"${id}" is reserved`);
    if (first === undefined) firstIndex.set(id, i);
    else issue(['nodes', i, 'id'], `duplicate id "${id}" (first at nodes.${first})`);
  });

  const edges: [string, string][] = [];
  const seen = new Set<string>();
  const edge = (from: string, to: string): number => {
    const key = `${from}\u0000${to}`;
    if (seen.has(key)) return -1;
    seen.add(key);
    return edges.push([from, to]) - 1;
  };

  declared.forEach((node, i) => {
    const at = (...path: (string | number)[]): (string | number)[] => ['nodes', i, ...path];
    const { json } = node;
    for (const problem of node.problems) issue(at(...problem.at), problem.message);
    checkBounds(json, (path, message) => issue(at(...path), message));
    if (json.kind === 'tool' && !node.problems.some((p) => p.at[0] === 'tool'))
      checkToolCall(node, tools, (path, message) => issue(at(...path), message));

    for (const field of REFERENCE_FIELDS[json.kind]) {
      for (const ref of findReferences(getPath(json, field), [...field])) {
        const [root, step] = ref.expr.split('.');
        if (root === 'input') continue;
        if (root === undefined || !firstIndex.has(root))
          issue(at(...ref.at), `reference to unknown node "${root}"`);
        else if (root === json.id) issue(at(...ref.at), `node "${json.id}" references itself`);
        else if (step === undefined || !SNAPSHOT_FIELDS.includes(step))
          issue(at(...ref.at), `reference "${ref.expr}" must read one of ${SNAPSHOT_FIELDS.join(', ')}`);
        else edge(root, json.id);
      }
    }
  });

  declared.forEach(({ json: { id }, dependsOn }) => {
    for (const from of dependsOn) {
      const k = edge(from, id);
      if (k < 0) continue;
      if (!firstIndex.has(from)) issue(['edges', k, 0], `unknown node "${from}" (in dependsOn of "${id}")`);
      else if (from === id) issue(['edges', k], `self-edge on "${id}"`);
    }
  });
  // Like the API, a cycle is looked for among the edges that name two different known nodes.
  const sound = edges.filter(([from, to]) => from !== to && firstIndex.has(from) && firstIndex.has(to));
  const cycle = findCycle([...firstIndex.keys()], sound);
  if (cycle) issue(['edges'], `cycle: ${cycle.join(' → ')}`);

  const nodes = declared.map((node) => node.json) as unknown as Graph['nodes'];
  return { graph: structuredClone({ nodes, edges }), issues };
}

type Issue = (path: readonly (string | number)[], message: string) => void;

const within = (value: unknown, min: number, max: number): boolean =>
  typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;

/** The node's numbers and strings are within the API's bounds. */
function checkBounds(json: DeclaredNode['json'], issue: Issue): void {
  for (const [field, min, max] of BOUNDS[json.kind]) {
    const value = json[field];
    if (value === undefined) continue;
    if (typeof value === 'string') {
      if (!within(value.length, min, max)) issue([field], `must be ${min} to ${max} characters long`);
    } else if (!within(value, min, max)) issue([field], `must be an integer from ${min} to ${max}`);
  }
  const retry = json.retry as Readonly<Record<string, unknown>> | undefined;
  for (const cls of RETRY_CLASSES) {
    if (retry?.[cls] !== undefined && !within(retry[cls], 0, 10))
      issue(['retry', cls], 'must be an integer from 0 to 10');
  }
}

/** The tool is known, and args without references fit the input schema of a tool given as one. */
function checkToolCall(node: DeclaredNode, tools: ReadonlySet<string>, issue: Issue): void {
  const name = node.json.tool as string;
  if (!tools.has(name) && !name.startsWith(MCP_PREFIX)) {
    issue(['tool'], `unknown tool "${name}"; known tools: ${[...tools].sort().join(', ')}, mcp.*`);
    return;
  }
  const args = node.json.args;
  // Like the API: args with references are checked when the run resolves them.
  if (!node.tool || findReferences(args).length > 0) return;
  // A secret is a string of unknown content until the call: checked as one (the API's mask).
  const parsed = node.tool.input.safeParse(maskSecrets(args));
  if (!parsed.success) for (const i of parsed.error.issues) issue(['args', ...i.path.map(String)], i.message);
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function maskSecrets(value: unknown): unknown {
  if (isRecord(value) && Object.keys(value).length === 1 && typeof value.$secret === 'string')
    return '[secret]';
  if (Array.isArray(value)) return value.map(maskSecrets);
  if (isRecord(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskSecrets(v)]));
  return value;
}

/** Every reference in `value` (the API's grammar: `{"$ref"}` alone, `{{…}}` in strings), in order. */
function findReferences(
  value: unknown,
  at: (string | number)[] = [],
): { expr: string; at: (string | number)[] }[] {
  if (isRecord(value) && Object.keys(value).length === 1 && typeof value.$ref === 'string')
    return [{ expr: value.$ref, at }];
  if (typeof value === 'string') return [...value.matchAll(TEMPLATE)].map((m) => ({ expr: m[1] ?? '', at }));
  if (Array.isArray(value)) return value.flatMap((item, i) => findReferences(item, [...at, i]));
  if (isRecord(value)) return Object.entries(value).flatMap(([k, v]) => findReferences(v, [...at, k]));
  return [];
}

function getPath(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const key of path) current = isRecord(current) ? current[key] : undefined;
  return current;
}

/** One cycle as a closed walk (`[a, b, a]`), found as the API finds it; undefined when acyclic. */
function findCycle(ids: readonly string[], edges: readonly [string, string][]): string[] | undefined {
  const children = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const [from, to] of edges) children.get(from)?.push(to);
  const state = new Map<string, 'open' | 'done'>();
  for (const start of ids) {
    if (state.has(start)) continue;
    const stack = [{ id: start, next: 0 }];
    state.set(start, 'open');
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const child = children.get(frame.id)?.[frame.next++];
      if (child === undefined) {
        state.set(frame.id, 'done');
        stack.pop();
      } else if (state.get(child) === 'open') {
        return [...stack.slice(stack.findIndex((f) => f.id === child)).map((f) => f.id), child];
      } else if (!state.has(child)) {
        state.set(child, 'open');
        stack.push({ id: child, next: 0 });
      }
    }
  }
  return undefined;
}
