/**
 * Runs one tool call under a deadline. The tool gets an AbortSignal; if it ignores it, the call
 * is abandoned (not awaited) when the deadline or a run abort fires. A shutdown (`shutdownSignal`,
 * given for custom tools) aborts the signal too but awaits the call, so the tool can stop cleanly
 * within the shutdown grace; whatever it then answers short of an output is the shutdown's
 * `aborted`.
 */
import { z } from 'zod';
import { isZodError, ToolError, toErrorData, type NodeErrorData } from '../errors/node-error.js';
import type { Tool, ToolContext, ToolOutcome } from '../tools/tool.js';

export async function invokeTool(
  tool: Tool,
  rawArgs: unknown,
  /** Made for this call alone: it gets the call's `signal` (an accessor) added in place. */
  ctx: Omit<ToolContext, 'signal'>,
  limits: { timeoutMs: number; runSignal: AbortSignal; shutdownSignal?: AbortSignal },
): Promise<ToolOutcome> {
  const parsed = tool.input.safeParse(rawArgs);
  if (!parsed.success) return { ok: false, error: toErrorData(parsed.error) };

  // Made when the tool reads its signal (many never do), aborted at once if the call was stopped.
  let controller: AbortController | undefined;
  let stopped: ToolError | undefined;
  const signalOf = (): AbortSignal => {
    if (!controller) {
      controller = new AbortController();
      if (stopped) controller.abort(stopped);
    }
    return controller.signal;
  };
  let abandon: (error: ToolError) => void = () => undefined;
  const abandoned = new Promise<never>((_, reject) => {
    abandon = reject;
  });
  /** Aborts the tool's signal and, unless `awaited`, stops waiting for the call. */
  const stop = (error: ToolError, awaited = false): void => {
    stopped ??= error;
    controller?.abort(stopped);
    if (!awaited) abandon(stopped);
  };
  const timer = setTimeout(
    () => stop(new ToolError('timeout', `timed out after ${limits.timeoutMs} ms`)),
    limits.timeoutMs,
  );
  const onRunAbort = (): void => stop(new ToolError('aborted', 'run aborted'));
  if (limits.runSignal.aborted) onRunAbort();
  else limits.runSignal.addEventListener('abort', onRunAbort, { once: true });
  const onShutdown = (): void => stop(new ToolError('aborted', SHUTDOWN_MESSAGE), true);
  if (limits.shutdownSignal?.aborted) onShutdown();
  else limits.shutdownSignal?.addEventListener('abort', onShutdown, { once: true });
  // The caller's fresh context gains the signal as an accessor, in place: copying its accessors
  // (so that what it makes on demand, the idempotency key, is still made only when the tool reads
  // it) cost more than the rest of this function, on every tool call.
  const toolContext = Object.defineProperty(ctx, 'signal', {
    get: signalOf,
    enumerable: true,
    configurable: true,
  }) as ToolContext;
  const call = Promise.resolve().then(() => tool.run(parsed.data, toolContext));
  // An abandoned call may still settle later; its result is ignored, never unhandled.
  call.catch(() => undefined);
  abandoned.catch(() => undefined);
  try {
    const output = await Promise.race([call, abandoned]);
    const checked = tool.output.safeParse(output);
    if (!checked.success) {
      return {
        ok: false,
        error: {
          code: 'validation',
          message: `tool ${tool.name} returned an output that does not match its schema: ${z.prettifyError(checked.error)}`,
        },
      };
    }
    return { ok: true, output: checked.data };
  } catch (err) {
    // The harness knows why it aborted; that wins over whatever the tool made of the abort.
    return { ok: false, error: stopped ? stopped.toData() : thrownError(err) };
  } finally {
    clearTimeout(timer);
    limits.runSignal.removeEventListener('abort', onRunAbort);
    limits.shutdownSignal?.removeEventListener('abort', onShutdown);
  }
}

/** Why a custom tool's call was aborted when its worker process started shutting down. */
export const SHUTDOWN_MESSAGE = 'worker shutting down';

/** Error codes of Node's and undici's network failures: the call never got an answer. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** The code of a network failure in `err` or its causes (`fetch` wraps undici's in "fetch failed"). */
function networkCode(err: unknown, depth = 0): string | undefined {
  if (typeof err !== 'object' || err === null || depth > 3) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return code;
  // Connecting to every address of a name fails as one AggregateError.
  const errors = (err as { errors?: unknown }).errors;
  if (Array.isArray(errors))
    for (const e of errors) if (networkCode(e, depth + 1)) return networkCode(e, depth + 1);
  const inner = networkCode((err as { cause?: unknown }).cause, depth + 1);
  if (inner !== undefined) return inner;
  // `fetch` answers every failure to get a response (refused, reset, a port it will not use) so.
  return err instanceof TypeError && err.message === 'fetch failed' ? 'fetch failed' : undefined;
}

/**
 * What a tool's throw is: its ToolError's class; a network failure (`fetch`, undici, sockets) is
 * `network`; a zod error `validation`; anything else `internal` (not retried by default).
 */
export function thrownError(err: unknown): NodeErrorData {
  if (err instanceof ToolError || isZodError(err)) return toErrorData(err);
  const code = networkCode(err);
  if (code !== undefined) {
    const message = err instanceof Error ? err.message : String(err);
    const cause = (err as { cause?: { message?: unknown } }).cause?.message;
    const why = code !== 'fetch failed' ? code : typeof cause === 'string' ? cause : undefined;
    return {
      code: 'network',
      message: message === 'fetch failed' && why ? `fetch failed (${why})` : message,
    };
  }
  return toErrorData(err);
}
