import { z } from 'zod';

/**
 * Why a node failed, as plain data that crosses queues and the API. Recognised by `code`,
 * never by message text.
 */
export const ErrorCode = z.enum([
  'network',
  'timeout',
  'rate_limited',
  'server',
  'auth',
  'validation',
  'aborted',
  'budget_exhausted',
  'internal',
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

export const NodeErrorData = z.object({
  code: ErrorCode,
  message: z.string(),
  /** HTTP status when the failure came from an HTTP response. */
  status: z.number().int().optional(),
  /** Server-requested delay before a retry (`Retry-After`), in ms. */
  retryAfterMs: z.number().int().nonnegative().optional(),
});
export type NodeErrorData = z.infer<typeof NodeErrorData>;

/** Thrown by tools and the harness; carries a code so callers never parse messages. */
export class ToolError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: { status?: number; retryAfterMs?: number } = {},
  ) {
    super(message);
    this.name = 'ToolError';
  }

  toData(): NodeErrorData {
    return { code: this.code, message: this.message, ...this.extra };
  }
}

/** Maps anything thrown during a node to error data. Unknown throwables are `internal`. */
export function toErrorData(err: unknown): NodeErrorData {
  if (err instanceof ToolError) return err.toData();
  if (err instanceof z.ZodError) {
    return { code: 'validation', message: z.prettifyError(err) };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { code: 'internal', message };
}
