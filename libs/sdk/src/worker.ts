/**
 * `startWorker`: serves custom tools from a team's own process, as `tetraloop worker --pool tool
 * --tools <module> --queues <names>` does — the same tool pool, configured from the environment
 * (`REDIS_URL`, `TETRALOOP_*`), with the tools given here besides those of TETRALOOP_TOOL_MODULES.
 */
import { parseWorkerEnv, startHealthServer, startPools, type PoolsHandle } from '@tetraloop/workers';
import type { CustomTool } from '@tetraloop/core/tools';

export interface StartWorkerOptions {
  /**
   * The tools this process serves (each made with `defineTool`). Each tool's input type was held
   * to where it was defined; a list of them holds tools of any input (a zod schema's type does not
   * widen to another).
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly tools: readonly CustomTool<any, unknown>[];
  /** The queues it serves: each tool's queue must be among them. @defaultValue ["default"] */
  readonly queues?: readonly string[];
  /** Node jobs run at once. @defaultValue TETRALOOP_TOOL_CONCURRENCY (32) */
  readonly concurrency?: number;
  /** Serve `/healthz`, `/readyz` and `/metrics` on this port. */
  readonly metricsPort?: number;
  /** The environment to read the configuration from. @defaultValue process.env */
  readonly env?: Record<string, string | undefined>;
  /** Close gracefully on SIGTERM and SIGINT. @defaultValue true */
  readonly handleSignals?: boolean;
}

export interface ToolWorker {
  /** The id this worker publishes its tools under in the catalog. */
  readonly workerId: string | undefined;
  readonly pools: PoolsHandle;
  /** Stops taking jobs, lets active ones finish within the shutdown grace, leaves the catalog. */
  close(): Promise<void>;
}

export async function startWorker(options: StartWorkerOptions): Promise<ToolWorker> {
  const env = parseWorkerEnv(options.env ?? process.env);
  const queues = options.queues ?? ['default'];
  const pools = await startPools(env, {
    pools: ['tool'],
    tools: options.tools,
    queues,
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
  });
  const health =
    options.metricsPort !== undefined ? await startHealthServer(options.metricsPort, pools.ready) : undefined;
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await pools.close();
      await health?.close();
    })());
  if (options.handleSignals ?? true) {
    const onSignal = (): void => {
      void close().then(() => process.exit(0));
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  }
  return { workerId: pools.mcp.serving?.workerId, pools, close };
}
