/**
 * `graph()`: a run's graph written in TypeScript. Each `g.tool` and `g.llm` declares a node and
 * answers a handle whose `out` reads the node's output, typed from the tool's output schema; a
 * reference in a node's args (or in `g.text`) is what makes it run after the node it reads, so the
 * edges are inferred. `g.build()` checks the graph as the API would and answers the JSON
 * `POST /v1/runs` takes as `graph`.
 */
import type { Graph } from '../types.js';
import { GraphBuildError } from './graph-build-error.js';
import { BUILTIN_TOOLS, compileGraph, type BuiltinToolName, type DeclaredNode } from './graph-checks.js';
import { makeRef, refExpression, refInfo, stepProblem, type AnyRef, type Ref, type RefBase } from './ref.js';
import { toJson, type JsonContext, type NodeProblem } from './to-json.js';
import type { ToolArgs, ToolLike, ToolOutput } from './tool-like.js';

type NodeJson<K extends string> = Extract<Graph['nodes'][number], { kind: K }>;

/** A node declared in a graph: its id, and a reference to its output. */
export interface NodeHandle<O> {
  readonly id: string;
  /** The node's output (`{"$ref": "<id>.output"}`); its fields are references too. */
  readonly out: Ref<O>;
}

/** A node whose output has no schema here (a built-in tool's, a structured answer): `out` reads any path. */
export interface LooseNodeHandle {
  readonly id: string;
  readonly out: AnyRef;
}

/** A node a node runs after, beyond those it references: its handle, or its id (a later node's too). */
export type Dependency = { readonly id: string; readonly out: RefBase<unknown> } | string;

/**
 * What a `tool` node may set besides its tool and args (`priority`, `timeoutMs`, `retry`,
 * `onError`, a TTL…): the fields of the API's tool node, as its OpenAPI document declares them.
 */
export type ToolOptions = Omit<NodeJson<'tool'>, 'id' | 'kind' | 'tool' | 'args'> & {
  readonly dependsOn?: readonly Dependency[];
};

/** An `llm` node's fields (`prompt`, `system`, `schema`, `model`…), as the API's document declares them. */
export type LlmOptions = Omit<NodeJson<'llm'>, 'id' | 'kind'> & {
  readonly dependsOn?: readonly Dependency[];
};

/** What an `llm` node without `schema` answers. */
export interface LlmText {
  readonly text: string;
  /** The model's reasoning, when `thinking` asked for its summary. */
  readonly reasoning?: string;
}

/** An `llm` node's `schema`: a JSON schema its answer must fit. */
type StructuredSchema = NonNullable<LlmOptions['schema']>;

/** What `g.text` interpolates: references as `{{…}}`, other values as they print. */
export type TextValue = RefBase<unknown> | string | number | boolean;

/** References to the run's input: typed when the graph is (`graph<{ email: string }>()`). */
export type InputRefs<In> = unknown extends In
  ? (key?: string) => AnyRef
  : { (): Ref<In>; <K extends keyof In & string>(key: K): Ref<In[K]> };

export interface GraphBuilder<In = unknown> {
  /** `g.input('email')`: the run's `input.email` (`g.input()`: the whole input). */
  readonly input: InputRefs<In>;
  /**
   * A node that calls `tool` (a tool from `defineTool`, or any `{name, input, output}` with zod
   * schemas): its args are typed from the tool's input, its `out` from the tool's output.
   */
  tool<T extends ToolLike>(
    id: string,
    tool: T,
    args: ToolArgs<T>,
    options?: ToolOptions,
  ): NodeHandle<ToolOutput<T>>;
  /** A node that calls a built-in tool (or an MCP server's, `mcp.<server>.<tool>`) by name. */
  tool(
    id: string,
    tool: BuiltinToolName | `mcp.${string}`,
    args?: Readonly<Record<string, unknown>>,
    options?: ToolOptions,
  ): LooseNodeHandle;
  /** A model call that answers text (`out.text`). */
  llm(id: string, options: LlmOptions & { readonly schema?: undefined }): NodeHandle<LlmText>;
  /** A model call whose answer fits a JSON schema: `out` reads any path. */
  llm(id: string, options: LlmOptions & { readonly schema: StructuredSchema }): LooseNodeHandle;
  /** A model call whose answer fits a JSON schema, `O` the answer's type: `out` is typed by it. */
  llm<O>(id: string, options: LlmOptions & { readonly schema: StructuredSchema }): NodeHandle<O>;
  /** A string with references in it: `` g.text`Hello ${c.out.name}` `` is `"Hello {{c.output.name}}"`. */
  text(strings: TemplateStringsArray, ...values: readonly TextValue[]): string;
  /**
   * The graph as `POST /v1/runs` takes it, edges inferred from references and `dependsOn`; a graph
   * the API would refuse throws a `GraphBuildError` with every problem at its path.
   */
  build(): Graph;
}

/** The node each handle stands for, across builders. */
const handles = new WeakMap<object, { readonly owner: object; readonly id: string }>();
const handleId = (value: unknown): string | undefined =>
  typeof value === 'object' && value !== null ? handles.get(value)?.id : undefined;

/** A new, empty graph. `In` types `g.input`: the run's input. */
export function graph<In = unknown>(): GraphBuilder<In> {
  const owner = {};
  const declared: DeclaredNode[] = [];
  const tools = new Set<string>(BUILTIN_TOOLS);

  const declare = (
    kind: 'tool' | 'llm',
    id: string,
    fields: Record<string, unknown>,
    options: { readonly dependsOn?: readonly Dependency[] } | undefined,
    tool?: ToolLike,
    problems: NodeProblem[] = [],
  ): LooseNodeHandle => {
    const ctx: JsonContext = { owner, handleId, problems };
    const { dependsOn = [], ...rest } = options ?? {};
    const json = toJson({ id, kind, ...fields, ...rest }, [], ctx) as DeclaredNode['json'];
    const after = dependsOn.map((dep, i) => dependencyId(dep, ['dependsOn', i], ctx));
    declared.push({
      json,
      dependsOn: after.filter((d) => d !== undefined),
      problems,
      ...(tool ? { tool } : {}),
    });
    const handle = Object.freeze({ id, out: makeRef({ owner, root: id, path: ['output'] }) });
    handles.set(handle, { owner, id });
    return handle;
  };

  const dependencyId = (dep: unknown, at: (string | number)[], ctx: JsonContext): string | undefined => {
    if (typeof dep === 'string') return dep;
    const known = typeof dep === 'object' && dep !== null ? handles.get(dep) : undefined;
    if (!known) ctx.problems.push({ at, message: 'must be a node of this graph or a node id' });
    else if (known.owner !== owner)
      ctx.problems.push({ at, message: `depends on node "${known.id}" of another graph` });
    else return known.id;
    return undefined;
  };

  const textPiece = (value: unknown): string => {
    const ref = refInfo(value);
    if (ref) {
      if (ref.owner !== undefined && ref.owner !== owner)
        throw new TypeError(`g.text: ${refExpression(ref)} references a node of another graph`);
      const problem = stepProblem(ref, true);
      if (problem !== undefined) throw new TypeError(`g.text: ${problem}`);
      return `{{${refExpression(ref)}}}`;
    }
    if (['string', 'number', 'boolean'].includes(typeof value)) return String(value);
    throw new TypeError('g.text takes references, strings, numbers and booleans');
  };

  return {
    input: ((key?: string) =>
      makeRef({ owner: undefined, root: 'input', path: key === undefined ? [] : [key] })) as InputRefs<In>,

    tool: (id: string, tool: ToolLike | string, args: unknown = {}, options?: ToolOptions) => {
      if (typeof tool === 'string') return declare('tool', id, { tool, args }, options);
      if (!isToolLike(tool)) {
        const problems = [
          { at: ['tool'], message: "must be a tool's name or a tool ({name, input, output})" },
        ];
        return declare('tool', id, { tool: '', args }, options, undefined, problems);
      }
      tools.add(tool.name);
      return declare('tool', id, { tool: tool.name, args }, options, tool);
    },

    // One implementation for the overloads: the handle is the same, only its type differs.
    llm: ((id: string, options: LlmOptions) => declare('llm', id, {}, options)) as GraphBuilder<In>['llm'],

    text: (strings: TemplateStringsArray, ...values: readonly TextValue[]): string =>
      strings.reduce((text, part, i) => text + (i > 0 ? textPiece(values[i - 1]) : '') + part, ''),

    build: (): Graph => {
      const { graph: built, issues } = compileGraph(declared, tools);
      if (issues.length > 0) throw new GraphBuildError(issues, built);
      return built;
    },
  };
}

const isToolLike = (value: unknown): value is ToolLike => {
  const tool = value as Partial<ToolLike> | null;
  return (
    typeof tool === 'object' &&
    tool !== null &&
    typeof tool.name === 'string' &&
    typeof tool.input?.safeParse === 'function'
  );
};
