import { z } from 'zod';

/**
 * Why a node failed, as plain data that crosses queues and the API: a discriminated union on
 * `code`. Recognised by code, never by message text.
 */
const message = z.string();
const status = z.number().int();
const retryAfterMs = z.number().int().nonnegative();

export const NodeErrorData = z.discriminatedUnion('code', [
  z.object({ code: z.literal('network'), message }),
  /** A call past its time limit; `expired`: a node not started before its TTL (`onExpire: "fail"`). */
  z.object({ code: z.literal('timeout'), message, expired: z.literal(true).optional() }),
  /** HTTP 429; `retryAfterMs` from the server's Retry-After. */
  z.object({
    code: z.literal('rate_limited'),
    message,
    status: status.optional(),
    retryAfterMs: retryAfterMs.optional(),
  }),
  /** HTTP 5xx. */
  z.object({
    code: z.literal('server'),
    message,
    status: status.optional(),
    retryAfterMs: retryAfterMs.optional(),
  }),
  /** HTTP 401/403. */
  z.object({ code: z.literal('auth'), message, status: status.optional() }),
  /** Bad arguments, a refused address, or an HTTP 4xx other than 401/403/429. */
  z.object({
    code: z.literal('validation'),
    message,
    status: status.optional(),
    /** A model's answer that is not JSON or does not match its node's schema. */
    invalidAnswer: z.literal(true).optional(),
    /**
     * Which limit refused the call, for failures a caller handles by kind:
     * `response_too_large` (a response body past `TETRALOOP_HTTP_MAX_BYTES`), `egress_refused`
     * (a private destination not allowlisted), `secret_not_allowed` (a secret's scope does not
     * allow the host or tool the call would give it to; nothing was sent), `too_many_items` (a
     * map's list is longer than its `maxItems`), `min_success` (fewer of a map's items succeeded
     * than its `minSuccess`).
     */
    reason: z
      .enum(['response_too_large', 'egress_refused', 'secret_not_allowed', 'too_many_items', 'min_success'])
      .optional(),
  }),
  /** Stopped by a cancel, a failure elsewhere in the run, or the run deadline. */
  z.object({ code: z.literal('aborted'), message }),
  /**
   * A run budget spent (`toolCalls`, `toolTimeMs`, `tokens`, `costUsd`), or the tenant's daily
   * cap on model spending (`dailyCostUsd`).
   */
  z.object({
    code: z.literal('budget_exhausted'),
    message,
    budget: z.enum(['toolCalls', 'toolTimeMs', 'tokens', 'costUsd', 'dailyCostUsd']),
  }),
  /** Executed more often than a node may be in one run (retries plus redeliveries). */
  z.object({ code: z.literal('suspected_loop'), message, executions: z.number().int() }),
  /** Refused before it went out: an active hard lesson says the service it calls is down. */
  z.object({ code: z.literal('blocked_by_lesson'), message, lessonId: z.string() }),
  /**
   * A bug or a deployment fault; `tool_code_missing`: a node that calls its tools in its own process
   * (an agent, a loop) called a custom tool whose module that process did not load, and it cannot
   * send the call to the tool's queue; `tool_unserved`: no live worker serves the tool's queue.
   */
  z.object({
    code: z.literal('internal'),
    message,
    reason: z.enum(['tool_code_missing', 'tool_unserved']).optional(),
  }),
]);
export type NodeErrorData = z.infer<typeof NodeErrorData>;
export type ErrorCode = NodeErrorData['code'];
export const ERROR_CODES = NodeErrorData.options.map((o) => o.shape.code.value) as readonly ErrorCode[];

type Extra<C extends ErrorCode> = Omit<Extract<NodeErrorData, { code: C }>, 'code' | 'message'>;

/**
 * What marks a ToolError of any copy of this module. A team's tool module loads `@tetraloop/sdk`
 * (and with it a copy of this module) from its own dependencies, while the `tetraloop` command
 * runs from one bundled file with its own copy: an error thrown by the one must still be a
 * ToolError to the other, so `instanceof` checks this mark rather than the prototype chain.
 */
const TOOL_ERROR = Symbol.for('tetraloop.ToolError');

/** Thrown by tools and the harness; carries a code so callers never parse messages. */
export class ToolError<C extends ErrorCode = ErrorCode> extends Error {
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && TOOL_ERROR in value;
  }

  constructor(
    readonly code: C,
    message: string,
    readonly extra: Extra<C> = {} as Extra<C>,
  ) {
    super(message);
    this.name = 'ToolError';
  }

  toData(): NodeErrorData {
    return { code: this.code, message: this.message, ...this.extra } as NodeErrorData;
  }
}
Object.defineProperty(ToolError.prototype, TOOL_ERROR, { value: true });

/**
 * Whether `err` is a zod validation error, of this process's zod or of another copy (a tool
 * module's own dependencies may hold a second zod; its schemas throw that copy's errors).
 */
export function isZodError(err: unknown): err is z.ZodError {
  return (
    err instanceof z.ZodError ||
    (err instanceof Error && err.name === 'ZodError' && Array.isArray((err as { issues?: unknown }).issues))
  );
}

/** Maps anything thrown during a node to error data. Unknown throwables are `internal`. */
export function toErrorData(err: unknown): NodeErrorData {
  if (err instanceof ToolError) return err.toData();
  if (isZodError(err)) return { code: 'validation', message: z.prettifyError(err) };
  return { code: 'internal', message: err instanceof Error ? err.message : String(err) };
}
