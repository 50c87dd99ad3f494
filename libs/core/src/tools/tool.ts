import type { NodeErrorData } from '../errors/node-error.js';
import type { z } from 'zod';

export interface ToolContext {
  /** Aborted on node timeout, run cancel or run failure. Tools pass it to their I/O. */
  readonly signal: AbortSignal;
  readonly runId: string;
  readonly nodeId: string;
  /**
   * Stable across retries and redeliveries of one call, different for every other call (each loop
   * iteration, each tool call of an agent); an HMAC that reveals neither the run nor the node.
   */
  readonly idempotencyKey: string;
}

/** A tool: a named function with zod input and output schemas. */
export interface Tool<I = unknown, O = unknown> {
  readonly name: string;
  readonly description: string;
  readonly input: z.ZodType<I>;
  /**
   * The input as JSON Schema, when the tool was given one rather than defined by `input` (an MCP
   * server's tool: `input` then checks args against it): what the tool catalog shows. Absent, the
   * catalog's schema is generated from `input`.
   */
  readonly inputJsonSchema?: Readonly<Record<string, unknown>>;
  readonly output: z.ZodType<O>;
  run(args: I, ctx: ToolContext): Promise<O>;
  /**
   * The least time a call with these args needs, when the tool knows it (a timer does). Used
   * instead of the default node timeout when it is longer; a node's own `timeoutMs` always wins.
   */
  minTimeoutMs?(args: I): number;
  /**
   * The outside service a call with these args reaches (the http tool: the URL's host), when the
   * tool calls one: what the record of calls, its statistics and lessons about services are kept by.
   */
  target?(args: I): string | undefined;
  /**
   * The URL a call with these args sends them to, when the caller picks it (the http tool): a
   * secret then goes only to a host its `hosts` allow. A tool without it gets a secret only when
   * the secret's `tools` name it.
   */
  destination?(args: I): URL;
  /**
   * Strings a call makes out of its args and sends (the http tool: `user:password` of Basic auth,
   * sent as base64): each is masked like a secret's value in whatever the call answers, when the
   * call carried a secret.
   */
  derivedSecrets?(args: I): string[];
  /**
   * Checks of a call's args as the graph declares them (references and `{"$secret"}` still in
   * place), beyond the schema: each problem with its path below the args. The http tool refuses
   * credential headers written in clear here.
   */
  checkArgs?(args: Readonly<Record<string, unknown>>): ArgIssue[];
}

/** A problem with a call's declared args, at a path below them. */
export interface ArgIssue {
  readonly at: readonly (string | number)[];
  readonly message: string;
}

/** Erases a tool's generic types for storage in a registry; its schemas still guard the values. */
export function defineTool<I, O>(tool: Tool<I, O>): Tool {
  return tool;
}

export type ToolRegistry = ReadonlyMap<string, Tool>;

export function toolRegistry(tools: readonly Tool[]): ToolRegistry {
  return new Map(tools.map((t) => [t.name, t]));
}

/** The result of one tool call, as data: its output, or why it failed. */
export type ToolOutcome = { ok: true; output: unknown } | { ok: false; error: NodeErrorData };
