/**
 * Static validation of a graph before anything runs. Reports every problem it can find, each
 * with a path into the graph (`nodes.2.args.url`), so a client fixes them all in one round.
 * Nested graphs are checked the same way, recursively, then expanded. Pure: no I/O.
 */
import { z } from 'zod';
import type { ModelPolicy } from '../ceilings/ceilings.js';
import { DEFAULT_MAX_WAIT_DAYS, maxRunSeconds } from '../domain/wait-limits.js';
import { DEFAULT_GRAPH_LIMITS, MAX_NESTING, type GraphLimits } from '../graph/limits.js';
import { findReferences, getPath } from '../graph/references.js';
import { ITEM_ROOTS } from '../map/item-id.js';
import { FIXED_FIELDS, applyVariant, variantsOf } from '../graph/retry-variants.js';
import { Edge, NodeId, type ValidationIssue } from '../graph/schema.js';
import { ancestorsOf, buildTopology, findCycle, type Topology } from '../graph/topology.js';
import { MODEL_VARIABLES } from '../model/model-config.js';
import { findSecretRefs, malformedSecretRefs, withSecretsMasked } from '../secrets/secret-ref.js';
import {
  NODE_KINDS,
  isNodeKind,
  kindHas,
  kindsWith,
  referenceFields,
  type ExecutableGraph,
  type Graph,
  type GraphNode,
  type NodeCheck,
  type NodeKind,
  type NodeKindSpec,
} from '../nodes/index.js';
import type { ToolRegistry } from '../tools/tool.js';
import { isCustomTool } from '../tools/custom-tool.js';
import { expandGraph } from './expand.js';
import { itemGraphOf } from './item-graph.js';
import { missingPathIndex } from './output-paths.js';

export type { ValidationIssue };

/** The fields of a node snapshot a reference may read. */
const SNAPSHOT_FIELDS = new Set(['output', 'error', 'status', 'attempts', 'durationMs']);

/** `input` names the run's (or nested graph's) input in references, so no node may take it. */
const RESERVED_IDS = new Set(['input']);

export type ValidationResult =
  | {
      readonly ok: true;
      /** The graph as submitted, parsed. */
      readonly graph: Graph;
      /** The graph with nested graphs expanded: what executes. */
      readonly plan: ExecutableGraph;
      readonly topology: Topology;
    }
  | { readonly ok: false; readonly issues: readonly ValidationIssue[] };

const join = (...parts: readonly PropertyKey[]): string => parts.map(String).join('.');

function zodIssues(error: z.ZodError, prefix: readonly PropertyKey[]): ValidationIssue[] {
  return error.issues.map((i) => ({ path: join(...prefix, ...i.path), message: i.message }));
}

const GraphShape = z.strictObject({ nodes: z.array(z.unknown()), edges: z.array(z.unknown()).default([]) });

export interface ValidateOptions {
  readonly tools: ToolRegistry;
  readonly limits?: GraphLimits;
  /** Whether llm nodes and agent loops can run here. @defaultValue true */
  readonly modelConfigured?: boolean;
  /** Tools this run's agent may use; every registered tool when omitted. */
  readonly allowedTools?: ReadonlySet<string>;
  /** The run's input, when known: every top-level `input.*` reference must resolve in it. */
  readonly input?: { readonly value: unknown };
  /** The models this run may call (its tenant's and agent's ceilings); any when omitted. */
  readonly models?: ModelPolicy;
  /** Why a call of `tool` to `target` is refused (a hard lesson), or undefined when it is not. */
  readonly blocked?: (tool: string, target: string) => string | undefined;
  /**
   * The secrets a graph written by a model may reference (the run's grant); any secret of the
   * tenant when omitted (a graph its caller wrote).
   */
  readonly secrets?: ReadonlySet<string>;
  /**
   * The longest a wait node may wait, in ms (`TETRALOOP_MAX_WAIT_DAYS`).
   * @defaultValue 30 days
   */
  readonly maxWaitMs?: number;
  /** The instant a wait `until` a time is measured from. @defaultValue `Date.now()` */
  readonly now?: number;
}

interface Options extends ValidateOptions {
  readonly limits: GraphLimits;
  readonly waits: { readonly maxMs: number; readonly now: number };
}

export function validateGraph(raw: unknown, options: ValidateOptions): ValidationResult {
  const opts: Options = {
    ...options,
    limits: options.limits ?? DEFAULT_GRAPH_LIMITS,
    waits: {
      maxMs: options.maxWaitMs ?? maxRunSeconds(DEFAULT_MAX_WAIT_DAYS) * 1000,
      now: options.now ?? Date.now(),
    },
  };
  const issues: ValidationIssue[] = [];
  const graph = checkGraph(raw, [], 0, opts, issues);
  if (!graph || issues.length > 0) return { ok: false, issues };
  const plan = expandGraph(graph);
  const tooBig = limitIssues(
    plan.nodes.length,
    plan.edges.length,
    opts.limits,
    [],
    ' (nested graphs expanded)',
  );
  if (tooBig.length > 0) return { ok: false, issues: tooBig };
  const toolSchemas = customToolSchemas(plan, opts.tools);
  return {
    ok: true,
    graph,
    plan: toolSchemas ? { ...plan, toolSchemas } : plan,
    topology: buildTopology(
      plan.nodes.map((n) => n.id),
      plan.edges,
    ),
  };
}

/** The schema hash of each custom tool a plan's tool nodes call, when it calls any. */
function customToolSchemas(plan: ExecutableGraph, tools: ToolRegistry): Record<string, string> | undefined {
  const schemas: Record<string, string> = {};
  for (const node of plan.nodes) {
    const tool = node.kind === 'tool' ? tools.get(node.tool) : undefined;
    if (tool && isCustomTool(tool)) schemas[tool.name] = tool.custom.schemaHash;
  }
  return Object.keys(schemas).length > 0 ? schemas : undefined;
}

/** Checks one graph level, pushing problems to `issues`; returns the parsed graph when it parsed. */
function checkGraph(
  raw: unknown,
  prefix: readonly PropertyKey[],
  depth: number,
  opts: Options,
  issues: ValidationIssue[],
): Graph | undefined {
  const shape = GraphShape.safeParse(raw);
  if (!shape.success) {
    issues.push(...zodIssues(shape.error, prefix));
    return undefined;
  }
  const { nodes: rawNodes, edges: rawEdges } = shape.data;
  const at = (...parts: PropertyKey[]): string => join(...prefix, ...parts);
  const before = issues.length;
  if (rawNodes.length === 0) issues.push({ path: at('nodes'), message: 'a graph needs at least one node' });
  issues.push(...limitIssues(rawNodes.length, rawEdges.length, opts.limits, prefix));
  // Past the limits the graph is not inspected further: its size alone rejects it.
  if (issues.length > before) return undefined;

  // Nodes one by one, so one bad node does not hide the others' problems. Each node's tool-call
  // args (the only places a `{"$secret"}` may be) are noted, relative to the node.
  const argsOf = rawNodes.map((): (readonly PropertyKey[])[] => []);
  const nodes = rawNodes.map((n, i) =>
    checkNode(n, [...prefix, 'nodes', i], depth, opts, issues, argsOf[i]!),
  );

  // Ids, including those of nodes that failed elsewhere, so edges to them are not "unknown".
  const firstIndex = new Map<string, number>();
  rawNodes.forEach((n, i) => {
    const id = NodeId.safeParse((n as { id?: unknown } | null)?.id);
    if (!id.success) return;
    const first = firstIndex.get(id.data);
    if (RESERVED_IDS.has(id.data))
      issues.push({ path: at('nodes', i, 'id'), message: `"${id.data}" is reserved` });
    if (first === undefined) firstIndex.set(id.data, i);
    else
      issues.push({
        path: at('nodes', i, 'id'),
        message: `duplicate id "${id.data}" (first at nodes.${first})`,
      });
  });

  const edges: Edge[] = [];
  rawEdges.forEach((e, i) => {
    const parsed = Edge.safeParse(e);
    if (!parsed.success) {
      issues.push(...zodIssues(parsed.error, [...prefix, 'edges', i]));
      return;
    }
    const [from, to] = parsed.data;
    let ok = true;
    for (const [side, id] of [
      [0, from],
      [1, to],
    ] as const) {
      if (!firstIndex.has(id)) {
        issues.push({ path: at('edges', i, side), message: `unknown node "${id}"` });
        ok = false;
      }
    }
    if (from === to) {
      issues.push({ path: at('edges', i), message: `self-edge on "${from}"` });
      ok = false;
    }
    if (ok) edges.push(parsed.data);
  });

  const topology = buildTopology([...firstIndex.keys()], edges);
  const cycle = findCycle(topology);
  if (cycle) issues.push({ path: at('edges'), message: `cycle: ${cycle.join(' → ')}` });
  const ancestors = cycle ? undefined : ancestorsOf(topology);

  nodes.forEach((node, i) => {
    if (!node) return;
    for (const { value, path } of referenceFields(node)) {
      for (const problem of secretsOutsideArgs(value, path, argsOf[i]!))
        issues.push({ path: at('nodes', i, ...problem.at), message: problem.message });
      for (const ref of findReferences(value, [...path])) {
        // Its path is written out only for an issue: most references have none.
        const where = (): string => at('nodes', i, ...ref.at);
        const field = ref.path[0];
        // Inside a map's item template, `item` and `index` name the item (and only there).
        if (ITEM_ROOTS.has(ref.root) && inItemTemplate(node, ref.at)) continue;
        if (ref.root === 'input') {
          if (depth === 0 && opts.input && getPath(opts.input.value, ref.path) === undefined) {
            issues.push({
              path: where(),
              message: `input.${ref.path.join('.')} is missing from the run's input`,
            });
          }
          continue;
        }
        if (!firstIndex.has(ref.root)) {
          issues.push({ path: where(), message: `reference to unknown node "${ref.root}"` });
        } else if (ref.root === node.id) {
          issues.push({ path: where(), message: `node "${node.id}" references itself` });
        } else if (ancestors && !ancestors.get(node.id)?.has(ref.root)) {
          issues.push({
            path: where(),
            message: `node "${node.id}" references "${ref.root}" but does not depend on it`,
          });
        } else if (field === undefined || !SNAPSHOT_FIELDS.has(field)) {
          issues.push({
            path: where(),
            message: `reference "${[ref.root, ...ref.path].join('.')}" must read one of ${[...SNAPSHOT_FIELDS].join(', ')}`,
          });
        } else if (field === 'output') {
          const problem = outputPathProblem(nodes[firstIndex.get(ref.root)!], ref.path.slice(1), opts);
          if (problem)
            issues.push({
              path: where(),
              message: `reference "${[ref.root, ...ref.path].join('.')}": ${problem}`,
            });
        }
      }
    }
  });
  return issues.length > before ? undefined : { nodes: nodes as GraphNode[], edges };
}

/** Whether a reference at `at` inside `node` is in what its kind runs per item (a map's `node` or `input`). */
function inItemTemplate(node: GraphNode, at: readonly PropertyKey[]): boolean {
  return (NODE_KINDS[node.kind].itemFields ?? []).includes(String(at[0]));
}

/**
 * Why a path cannot be read in the output of `node`, when its tool says what it answers (a custom
 * tool's output schema) and the schema rules the path out.
 */
function outputPathProblem(
  node: GraphNode | undefined,
  path: readonly (string | number)[],
  opts: Options,
): string | undefined {
  if (!node || node.kind !== 'tool' || path.length === 0) return undefined;
  const tool = opts.tools.get(node.tool);
  if (!tool || !isCustomTool(tool)) return undefined;
  const missing = missingPathIndex(tool.custom.outputSchema, path);
  if (missing === -1) return undefined;
  const shown = ['output', ...path.slice(0, missing + 1)].join('.');
  return `tool "${tool.name}" (version ${tool.custom.version}) has no ${shown} in its output schema`;
}

/** Problems of a graph too large for the limits; `note` says what was counted. */
function limitIssues(
  nodes: number,
  edges: number,
  limits: GraphLimits,
  prefix: readonly PropertyKey[],
  note = '',
): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (nodes > limits.maxNodes) {
    issues.push({
      path: join(...prefix, 'nodes'),
      message: `${nodes} nodes${note} exceed the limit of ${limits.maxNodes}`,
    });
  }
  if (edges > limits.maxEdges) {
    issues.push({
      path: join(...prefix, 'edges'),
      message: `${edges} edges${note} exceed the limit of ${limits.maxEdges}`,
    });
  }
  return issues;
}

function checkNode(
  raw: unknown,
  path: readonly PropertyKey[],
  depth: number,
  opts: Options,
  issues: ValidationIssue[],
  argsPlaces: (readonly PropertyKey[])[],
): GraphNode | undefined {
  const kind = (raw as { kind?: unknown } | null)?.kind;
  if (!isNodeKind(kind)) {
    issues.push({
      path: join(...path, 'kind'),
      message: `kind must be one of ${Object.keys(NODE_KINDS).join(', ')}`,
    });
    return undefined;
  }
  const spec = NODE_KINDS[kind] as NodeKindSpec<GraphNode>;
  const parsed = spec.schema.safeParse(raw);
  if (!parsed.success) {
    issues.push(...zodIssues(parsed.error, path));
    return undefined;
  }
  const node = spec.check(parsed.data as GraphNode, nodeCheck(path, depth, opts, issues, argsPlaces));
  if (!node || !checkVariants(spec, node, path, depth, opts, issues, argsPlaces)) return undefined;
  if (!checkTtl(node, path, depth, opts, issues, argsPlaces)) return undefined;
  return node;
}

/**
 * A node's TTL (`graph/task-ttl.ts`): one of `ttlMs` and `expiresAt`, what to do on expiry only
 * with one of them, and a fallback exactly when it downgrades — a node of its own, of a kind that
 * may be a fallback (`mayBeFallback`), checked like one under the node's id.
 */
function checkTtl(
  node: GraphNode,
  path: readonly PropertyKey[],
  depth: number,
  opts: Options,
  issues: ValidationIssue[],
  argsPlaces: (readonly PropertyKey[])[],
): boolean {
  const { ttlMs, expiresAt, onExpire, fallback } = node as {
    ttlMs?: number;
    expiresAt?: string;
    onExpire?: string;
    fallback?: Record<string, unknown>;
  };
  const before = issues.length;
  const issue = (field: string, message: string): number =>
    issues.push({ path: join(...path, field), message });
  if (ttlMs !== undefined && expiresAt !== undefined) issue('expiresAt', 'give ttlMs or expiresAt, not both');
  if (ttlMs === undefined && expiresAt === undefined) {
    if (onExpire !== undefined) issue('onExpire', 'needs ttlMs or expiresAt');
    if (fallback !== undefined) issue('fallback', 'needs ttlMs or expiresAt');
  }
  if (onExpire === 'downgrade' && fallback === undefined)
    issue('fallback', 'onExpire "downgrade" needs a fallback');
  if (onExpire !== 'downgrade' && fallback !== undefined)
    issue('fallback', 'is used only with onExpire "downgrade"');
  if (issues.length > before || fallback === undefined) return issues.length === before;
  const at = [...path, 'fallback'];
  const kind = fallback.kind;
  if (!kindHas(kind, 'mayBeFallback')) {
    issue('fallback', `a fallback is a ${kindsWith('mayBeFallback').join(' or ')} node`);
    return false;
  }
  const nested = ['id', 'ttlMs', 'expiresAt', 'onExpire', 'fallback'].filter((f) => f in fallback);
  for (const field of nested)
    issues.push({
      path: join(...at, field),
      message: 'a fallback takes the node’s id and has no TTL of its own',
    });
  if (nested.length > 0) return false;
  const spec = NODE_KINDS[kind as NodeKind] as NodeKindSpec<GraphNode>;
  checkStandIn(spec, { ...fallback, id: node.id }, path, ['fallback'], depth, opts, issues, argsPlaces);
  return issues.length === before;
}

/**
 * A node that may run in a node's place (a retry's variant, a fallback), at `within` inside it:
 * parsed and checked like the node itself, its tool-call args noted as args of the node.
 */
function checkStandIn(
  spec: NodeKindSpec<GraphNode>,
  raw: unknown,
  path: readonly PropertyKey[],
  within: readonly PropertyKey[],
  depth: number,
  opts: Options,
  issues: ValidationIssue[],
  argsPlaces: (readonly PropertyKey[])[],
): void {
  const at = [...path, ...within];
  const parsed = spec.schema.safeParse(raw);
  if (!parsed.success) {
    issues.push(...zodIssues(parsed.error, at));
    return;
  }
  // Its tool-call args are args too (a secret may stand in them), under its own path.
  const places: (readonly PropertyKey[])[] = [];
  spec.check(parsed.data as GraphNode, nodeCheck(at, depth, opts, issues, places));
  argsPlaces.push(...places.map((place) => [...within, ...place]));
}

/**
 * A node's retry overrides (`retry.vary`): each must leave the node valid — the node with it
 * applied is checked like the node itself — and may not change what the node is or how it fails.
 */
function checkVariants(
  spec: NodeKindSpec<GraphNode>,
  node: GraphNode,
  path: readonly PropertyKey[],
  depth: number,
  opts: Options,
  issues: ValidationIssue[],
  argsPlaces: (readonly PropertyKey[])[],
): boolean {
  const variants = variantsOf(node);
  if (variants.length === 0) return true;
  const before = issues.length;
  const at = [...path, 'retry', 'vary'];
  if (!spec.variesOnRetry) {
    issues.push({
      path: join(...at),
      message: `only ${kindsWith('variesOnRetry').join(' and ')} nodes vary their retries`,
    });
    return false;
  }
  variants.forEach((variant, i) => {
    const fixed = Object.keys(variant).filter((field) => FIXED_FIELDS.has(field));
    for (const field of fixed)
      issues.push({ path: join(...at, i, field), message: `a retry may not change "${field}"` });
    if (fixed.length > 0) return;
    checkStandIn(
      spec,
      applyVariant(node, variant),
      path,
      ['retry', 'vary', i],
      depth,
      opts,
      issues,
      argsPlaces,
    );
  });
  return issues.length === before;
}

/** What validation offers a kind's own checks, for the node at `path`; tool-call args are noted in `argsPlaces`. */
function nodeCheck(
  path: readonly PropertyKey[],
  depth: number,
  opts: Options,
  issues: ValidationIssue[],
  argsPlaces: (readonly PropertyKey[])[],
): NodeCheck {
  return {
    path,
    issue: (at, message) => issues.push({ path: join(...path, ...at), message }),
    model: (name, at) => checkModel(name, path, at, opts, issues),
    toolName: (name, at) => checkToolName(name, [...path, ...at], opts, issues),
    toolCall: (name, args, at) => {
      argsPlaces.push([...at, 'args']);
      return checkToolCall(name, args, [...path, ...at], ['args'], opts, issues);
    },
    template: (raw, at) => {
      // Its tool-call args are this node's args (a secret may stand in them), under its path.
      const places: (readonly PropertyKey[])[] = [];
      const node = checkNode(raw, [...path, ...at], depth, opts, issues, places);
      argsPlaces.push(...places.map((place) => [...at, ...place]));
      return node;
    },
    nested: (raw, at) => checkNested(raw, [...path, ...at], depth, opts, issues),
    itemGraph: (raw, at) => checkNested(itemGraphOf(raw), [...path, ...at], depth, opts, issues),
    secretNames: (names, at) => {
      const granted = opts.secrets;
      if (granted === undefined) return true;
      const before = issues.length;
      names.forEach((name, i) => {
        if (!granted.has(name)) issues.push({ path: join(...path, ...at, i), message: notGranted(name) });
      });
      return issues.length === before;
    },
    waits: opts.waits,
  };
}

/** A nested graph (of a graph node or a loop body), checked one level deeper. */
function checkNested(
  raw: unknown,
  path: readonly PropertyKey[],
  depth: number,
  opts: Options,
  issues: ValidationIssue[],
): Graph | undefined {
  if (depth + 1 > MAX_NESTING) {
    issues.push({ path: join(...path), message: `graphs nest at most ${MAX_NESTING} levels deep` });
    return undefined;
  }
  return checkGraph(raw, path, depth + 1, opts, issues);
}

/** Model-using nodes need a configured model, and one the run may call. */
function checkModel(
  name: string | undefined,
  path: readonly PropertyKey[],
  at: readonly PropertyKey[],
  opts: Options,
  issues: ValidationIssue[],
): boolean {
  if (opts.modelConfigured === false) {
    issues.push({ path: join(...path, 'kind'), message: `no model is configured: set ${MODEL_VARIABLES}` });
    return false;
  }
  const refused = opts.models?.refusal(name);
  if (refused === undefined) return true;
  issues.push({ path: join(...path, ...at), message: refused });
  return false;
}

/** The tool exists and this run's agent may use it. */
function checkToolName(
  name: string,
  path: readonly PropertyKey[],
  opts: Options,
  issues: ValidationIssue[],
): boolean {
  if (!opts.tools.has(name)) {
    const known = [...opts.tools.keys()].sort().join(', ');
    issues.push({ path: join(...path), message: `unknown tool "${name}"; known tools: ${known}` });
    return false;
  }
  if (opts.allowedTools && !opts.allowedTools.has(name)) {
    issues.push({ path: join(...path), message: `tool "${name}" is not allowed for this agent` });
    return false;
  }
  return true;
}

/** The tool exists and is allowed, and args without references fit its input schema. */
function checkToolCall(
  name: string,
  args: Record<string, unknown>,
  path: PropertyKey[],
  argsPath: PropertyKey[],
  opts: Options,
  issues: ValidationIssue[],
): boolean {
  if (!checkToolName(name, [...path, 'tool'], opts, issues)) return false;
  const tool = opts.tools.get(name)!;
  const before = issues.length;
  for (const problem of [
    ...malformedSecretRefs(args),
    ...ungrantedSecretRefs(args, opts.secrets),
    ...(tool.checkArgs?.(args) ?? []),
  ])
    issues.push({ path: join(...path, ...argsPath, ...problem.at), message: problem.message });
  if (issues.length > before) return false;
  // Args with references are checked at run time, once the references are resolved.
  if (findReferences(args).length > 0) return true;
  // A secret is a string of unknown content until the call: it is checked as one.
  const parsed = tool.input.safeParse(withSecretsMasked(args));
  if (!parsed.success) {
    issues.push(...zodIssues(parsed.error, [...path, ...argsPath]));
    return false;
  }
  const target = tool.target?.(parsed.data);
  const blocked = target === undefined ? undefined : opts.blocked?.(name, target);
  if (blocked === undefined) return true;
  issues.push({ path: join(...path, ...argsPath), message: blocked });
  return false;
}

/** References to secrets a model-written graph was not granted (none when `granted` is omitted). */
function ungrantedSecretRefs(
  args: Record<string, unknown>,
  granted: ReadonlySet<string> | undefined,
): { at: readonly (string | number)[]; message: string }[] {
  if (granted === undefined) return [];
  return findSecretRefs(args)
    .filter((ref) => !granted.has(ref.name))
    .map((ref) => ({ at: ref.at, message: notGranted(ref.name) }));
}

const notGranted = (name: string): string =>
  `secret "${name}" is not granted to this run: a planned node may use only the secrets the request grants ("secrets": ["${name}"] on the run or session message, or the agent's declared secrets)`;

/**
 * `{"$secret"}` objects in a node's reference field `field` that are not inside one of its
 * tool-call args (`argsPlaces`, relative to the node): a secret is only ever filled into a call.
 */
function secretsOutsideArgs(
  value: unknown,
  field: readonly PropertyKey[],
  argsPlaces: readonly (readonly PropertyKey[])[],
): { at: PropertyKey[]; message: string }[] {
  const inArgs = (at: readonly PropertyKey[]): boolean =>
    argsPlaces.some((place) => place.length <= at.length && place.every((step, i) => at[i] === step));
  const found = [...findSecretRefs(value), ...malformedSecretRefs(value)];
  return found
    .map((f) => [...field, ...f.at])
    .filter((at) => !inArgs(at))
    .map((at) => ({ at, message: '{"$secret"} may only stand in a tool call\'s args' }));
}
