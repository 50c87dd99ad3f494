/**
 * Runs one tool call under a deadline. The tool gets an AbortSignal; if it ignores it, the call
 * is abandoned (not awaited) when the deadline or a run abort fires.
 */
import { ToolError, toErrorData } from '../errors/node-error.js';
import type { Tool, ToolContext, ToolOutcome } from '../tools/tool.js';

export async function invokeTool(
  tool: Tool,
  rawArgs: unknown,
  ctx: Omit<ToolContext, 'signal'>,
  limits: { timeoutMs: number; runSignal: AbortSignal },
): Promise<ToolOutcome> {
  const parsed = tool.input.safeParse(rawArgs);
  if (!parsed.success) return { ok: false, error: toErrorData(parsed.error) };

  const controller = new AbortController();
  let stopped: ToolError | undefined;
  const stop = (error: ToolError): void => {
    stopped ??= error;
    controller.abort(error);
  };
  const timer = setTimeout(
    () => stop(new ToolError('timeout', `timed out after ${limits.timeoutMs} ms`)),
    limits.timeoutMs,
  );
  const onRunAbort = (): void => stop(new ToolError('aborted', 'run aborted'));
  if (limits.runSignal.aborted) onRunAbort();
  else limits.runSignal.addEventListener('abort', onRunAbort, { once: true });

  const abandoned = new Promise<never>((_, reject) => {
    controller.signal.addEventListener(
      'abort',
      () => reject(stopped ?? new ToolError('aborted', 'aborted')),
      { once: true },
    );
  });
  const call = Promise.resolve().then(() => tool.run(parsed.data, { ...ctx, signal: controller.signal }));
  // An abandoned call may still settle later; its result is ignored, never unhandled.
  call.catch(() => undefined);
  abandoned.catch(() => undefined);
  try {
    const output = await Promise.race([call, abandoned]);
    const checked = tool.output.safeParse(output);
    if (!checked.success) {
      return {
        ok: false,
        error: { code: 'internal', message: `tool ${tool.name} returned an invalid output` },
      };
    }
    return { ok: true, output: checked.data };
  } catch (err) {
    // The harness knows why it aborted; that wins over whatever the tool made of the abort.
    return { ok: false, error: toErrorData(stopped ?? err) };
  } finally {
    clearTimeout(timer);
    limits.runSignal.removeEventListener('abort', onRunAbort);
  }
}
