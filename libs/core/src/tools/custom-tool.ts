/**
 * A team's own tool: TypeScript code with zod schemas, served by the team's worker processes on
 * a queue of its own (or the shared node queue), checked and planned like a built-in one. This
 * module is the definition's contract: what a definition must hold (`defineCustomTool` checks it
 * and says which field is wrong), and what the catalog in Redis and every process learn of it
 * (`CustomToolInfo`: schemas as JSON Schema, queue, version, a hash of the schemas). Pure.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ErrorCode, NodeErrorData } from '../errors/node-error.js';
import type { Tool, ToolContext } from './tool.js';

/** What a custom tool's name looks like; dots group names (`crm.lookup`). */
export const CUSTOM_TOOL_NAME = /^[a-z][a-z0-9_.-]{0,63}$/;
/** Names the built-in tools, model calls and MCP servers' tools use: no custom tool takes them. */
const RESERVED_NAMES = new Set(['http', 'json', 'wait', 'llm']);
const RESERVED_PREFIX = 'mcp.';

/** Whether a tool name is one no custom tool may take: a built-in's, a model call's or an MCP tool's. */
export const isReservedToolName = (name: string): boolean =>
  RESERVED_NAMES.has(name) || name.startsWith(RESERVED_PREFIX);

/** What a queue of tool workers is called (`crm`, `gpu`): part of a BullMQ queue's name. */
export const TOOL_QUEUE_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
/** The queue every tool without one of its own goes to: the shared node queue. */
export const DEFAULT_TOOL_QUEUE = 'default';

/** The error classes a tool may give its own retry counts for (those a retry can help). */
export const TOOL_RETRY_CLASSES = [
  'network',
  'timeout',
  'rate_limited',
  'server',
  'internal',
] as const satisfies readonly ErrorCode[];
export type ToolRetry = Partial<Record<(typeof TOOL_RETRY_CLASSES)[number], number>>;

/** The most retries a tool may ask for a class: the same ceiling a node's `retry` has. */
const MAX_TOOL_RETRIES = 10;

/** What `ctx.log` of a custom tool offers: pino's levels, with the run's ids bound. */
export interface ToolLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/** What a custom tool's `run` gets beside its input. */
export interface CustomToolContext extends ToolContext {
  /** 1 for the first attempt of this call, 2 for its first retry, … */
  readonly attempt: number;
  readonly tenant: string;
  /** The agent the run belongs to, when it has one. */
  readonly agentId?: string;
  /**
   * The value of a secret the tool declares in `secrets`, when the secret's scope allows this tool
   * (its `tools` name it); rejects with a `validation` ToolError otherwise.
   */
  secret(name: string): Promise<string>;
  /** pino, with run, node and tool bound. */
  readonly log: ToolLogger;
  /** Reports how far the call is (0–1, optionally why): a `node.progress` event. */
  progress(fraction: number, message?: string): void;
}

/** A custom tool as a team defines it (`defineTool` of `@tetraloop/sdk`). */
export interface CustomToolDefinition<I, O> {
  readonly name: string;
  /** What the planner and the agent are told the tool does. */
  readonly description: string;
  readonly input: z.ZodType<I>;
  readonly output: z.ZodType<O>;
  /** Which worker processes serve it. @defaultValue the shared node queue */
  readonly queue?: string;
  /** Recorded on every attempt. @defaultValue "1" */
  readonly version?: string;
  /** Its calls' time limit, when a node gives none. @defaultValue the deployment's tool timeout */
  readonly timeoutMs?: number;
  /** Retries by error class, when a node gives none: within the operator's limits (0–10 each). */
  readonly retry?: ToolRetry;
  /** Most calls of it at once in one worker process. @defaultValue no limit beyond the pool's */
  readonly concurrency?: number;
  /** The secrets `ctx.secret()` may read. */
  readonly secrets?: readonly string[];
  run(input: I, ctx: CustomToolContext): Promise<O> | O;
}

const JsonSchemaObject = z.record(z.string(), z.unknown());

/** What every process knows of a custom tool, from the catalog in Redis: no code. */
export const CustomToolInfo = z.object({
  name: z.string().regex(CUSTOM_TOOL_NAME),
  description: z.string().max(10_000),
  inputSchema: JsonSchemaObject,
  outputSchema: JsonSchemaObject,
  queue: z.string().regex(TOOL_QUEUE_NAME),
  version: z.string().min(1).max(64),
  /** A hash of the two schemas: two versions with the same hash take and give the same values. */
  schemaHash: z.string(),
  timeoutMs: z.number().int().positive().max(600_000).optional(),
  retry: z.partialRecord(z.enum(TOOL_RETRY_CLASSES), z.number().int().min(0).max(10)).optional(),
  concurrency: z.number().int().positive().optional(),
  secrets: z.array(z.string()).default([]),
});
export type CustomToolInfo = z.infer<typeof CustomToolInfo>;

/** A custom tool with its code: what a worker process that serves it holds. */
export interface CustomTool<I = unknown, O = unknown> extends Tool<I, O> {
  readonly custom: CustomToolInfo;
  /** True: this process has the tool's code (a tool known only from the catalog has none). */
  readonly codeHere: boolean;
  run(args: I, ctx: ToolContext | CustomToolContext): Promise<O>;
}

/** Whether a tool in a registry is a team's own (with code here, or known from the catalog). */
export const isCustomTool = (tool: Tool): tool is CustomTool =>
  'custom' in tool && typeof (tool as { custom?: unknown }).custom === 'object';

/**
 * Why a custom tool cannot be called here: the process has it from the catalog only, without its
 * code, and cannot send the call to the tool's queue (an executor without remote calls: a program
 * embedding one). Ends the calling node (an agent is not told: it could do nothing about it).
 */
export const toolCodeMissing = (name: string, worker: string): NodeErrorData => ({
  code: 'internal',
  reason: 'tool_code_missing',
  message: `custom tool "${name}" has no code in the process running this node (${worker}), which cannot send the call to its queue: load the tool's module (--tools or TETRALOOP_TOOL_MODULES)`,
});

/**
 * Why an agent's or a loop's call of a custom tool without code here was not sent to its queue: the
 * catalog lists no live worker serving the tool there. Ends the calling node, like a missing module.
 */
export const toolUnserved = (name: string, queue: string): NodeErrorData => ({
  code: 'internal',
  reason: 'tool_unserved',
  message: `custom tool "${name}" has no code in the process running this node and no live worker serves its queue "${queue}": start one (tetraloop worker --pool tool --queues ${queue} --tools <module>)`,
});

/** Whether a call failed because no process could run its custom tool: a deployment fault. */
export const isToolUnavailable = (error: NodeErrorData): boolean =>
  error.code === 'internal' && (error.reason === 'tool_code_missing' || error.reason === 'tool_unserved');

/** The queue a tool's node jobs go to: a custom tool's own, else the shared node queue. */
export const queueOfTool = (tool: Tool | undefined): string =>
  tool && isCustomTool(tool) ? tool.custom.queue : DEFAULT_TOOL_QUEUE;

/** Marks a ToolDefinitionError of any copy of this module (see ToolError's mark for why). */
const TOOL_DEFINITION_ERROR = Symbol.for('tetraloop.ToolDefinitionError');

/** A definition that cannot serve: names the field and why. */
export class ToolDefinitionError extends Error {
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && TOOL_DEFINITION_ERROR in value;
  }

  constructor(
    readonly field: string,
    reason: string,
    readonly tool?: string,
  ) {
    super(`${tool ? `tool "${tool}": ` : ''}${field} ${reason}`);
    this.name = 'ToolDefinitionError';
  }
}
Object.defineProperty(ToolDefinitionError.prototype, TOOL_DEFINITION_ERROR, { value: true });

/**
 * Whether `value` is a zod schema: of this module's zod, or of the copy a team's own dependencies
 * hold (zod 4 schemas of any copy carry `_zod` and parse alike).
 */
const isZodType = (value: unknown): value is z.ZodType =>
  value instanceof z.ZodType ||
  (typeof value === 'object' &&
    value !== null &&
    '_zod' in value &&
    typeof (value as { safeParse?: unknown }).safeParse === 'function');

/** JSON Schema of a zod schema, as the catalog and the planner see it. */
function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output', field: string, tool: string) {
  try {
    return z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  } catch (err) {
    throw new ToolDefinitionError(
      field,
      `cannot be described as JSON Schema (${(err as Error).message})`,
      tool,
    );
  }
}

/** The hash of a tool's schemas: what tells two versions' contracts apart. */
export function schemaHashOf(input: unknown, output: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify([input, output]))
    .digest('hex')
    .slice(0, 12);
}

/**
 * Checks a definition and makes it a tool: each wrong field throws a ToolDefinitionError naming
 * it. A non-object definition, a reserved or malformed name, schemas that are not zod, a queue
 * name that cannot name a queue, out-of-range numbers: all refused here, before a worker starts.
 */
export function defineCustomTool<I, O>(definition: CustomToolDefinition<I, O>): CustomTool<I, O> {
  if (typeof definition !== 'object' || definition === null)
    throw new ToolDefinitionError('definition', 'must be an object');
  const d = definition;
  const name = typeof d.name === 'string' ? d.name : undefined;
  if (name === undefined || !CUSTOM_TOOL_NAME.test(name))
    throw new ToolDefinitionError('name', `must match ${CUSTOM_TOOL_NAME.source}`, name);
  if (isReservedToolName(name))
    throw new ToolDefinitionError('name', 'is taken by a built-in tool (http, json, wait, llm, mcp.*)', name);
  if (typeof d.description !== 'string' || d.description.trim() === '' || d.description.length > 10_000)
    throw new ToolDefinitionError(
      'description',
      'must be a non-empty string of at most 10000 characters',
      name,
    );
  if (!isZodType(d.input)) throw new ToolDefinitionError('input', 'must be a zod schema', name);
  if (!isZodType(d.output)) throw new ToolDefinitionError('output', 'must be a zod schema', name);
  if (typeof d.run !== 'function') throw new ToolDefinitionError('run', 'must be a function', name);
  const queue = d.queue ?? DEFAULT_TOOL_QUEUE;
  if (typeof queue !== 'string' || !TOOL_QUEUE_NAME.test(queue))
    throw new ToolDefinitionError('queue', `must match ${TOOL_QUEUE_NAME.source}`, name);
  const version = d.version ?? '1';
  if (typeof version !== 'string' || version.length === 0 || version.length > 64)
    throw new ToolDefinitionError('version', 'must be a string of 1 to 64 characters', name);
  const positive = (field: string, value: unknown, max: number): number | undefined => {
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max)
      throw new ToolDefinitionError(field, `must be an integer from 1 to ${max}`, name);
    return value;
  };
  const timeoutMs = positive('timeoutMs', d.timeoutMs, 600_000);
  const concurrency = positive('concurrency', d.concurrency, 10_000);
  const retry: Record<string, number> = {};
  for (const [cls, count] of Object.entries(d.retry ?? {})) {
    if (!(TOOL_RETRY_CLASSES as readonly string[]).includes(cls))
      throw new ToolDefinitionError(
        `retry.${cls}`,
        `is not a class a tool retries (${TOOL_RETRY_CLASSES.join(', ')})`,
        name,
      );
    if (typeof count !== 'number' || !Number.isInteger(count) || count < 0 || count > MAX_TOOL_RETRIES)
      throw new ToolDefinitionError(`retry.${cls}`, `must be an integer from 0 to ${MAX_TOOL_RETRIES}`, name);
    retry[cls] = count;
  }
  const secrets: unknown = d.secrets ?? [];
  if (!Array.isArray(secrets) || secrets.some((s) => typeof s !== 'string' || s === ''))
    throw new ToolDefinitionError('secrets', 'must be a list of secret names', name);
  const inputSchema = jsonSchemaOf(d.input, 'input', 'input', name);
  const outputSchema = jsonSchemaOf(d.output, 'output', 'output', name);
  const custom: CustomToolInfo = {
    name,
    description: d.description,
    inputSchema,
    outputSchema,
    queue,
    version,
    schemaHash: schemaHashOf(inputSchema, outputSchema),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(Object.keys(retry).length > 0 ? { retry } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
    secrets: [...(secrets as string[])],
  };
  const run = d.run.bind(d);
  return {
    name,
    description: d.description,
    input: d.input,
    output: d.output,
    custom,
    codeHere: true,
    // The service a call reaches is the tool itself: its failures make lessons as a host's do.
    target: () => name,
    // The executor gives a custom tool the whole context (`CustomToolContext`).
    run: async (input, ctx) => run(input, ctx as CustomToolContext),
  };
}
