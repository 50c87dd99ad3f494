import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { ToolError } from '../errors/node-error.js';
import { defineTool } from './tool.js';

const WaitInput = z.strictObject({ ms: z.number().int().min(0).max(3_600_000) });
const WaitOutput = z.object({ waitedMs: z.number() });

/** A timer node: resolves after `ms`, or fails `aborted` when the node is aborted. */
export const waitTool = defineTool({
  name: 'wait',
  description: 'Wait for a number of milliseconds.',
  input: WaitInput,
  output: WaitOutput,
  minTimeoutMs: (args) => args.ms + 1000,
  async run(args, ctx) {
    const started = performance.now();
    try {
      await delay(args.ms, undefined, { signal: ctx.signal });
    } catch {
      throw new ToolError('aborted', 'wait aborted');
    }
    return { waitedMs: Math.round(performance.now() - started) };
  },
});
