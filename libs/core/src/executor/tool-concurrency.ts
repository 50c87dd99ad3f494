/**
 * A custom tool's `concurrency`: at most that many of its calls at once in one worker process; the
 * others wait here, in order, until one ends (or their run is aborted). Per process, as the
 * definition says: the pool's concurrency and flow limits bound the rest.
 */
import { ToolError } from '../errors/node-error.js';

interface Gate {
  active: number;
  readonly waiting: (() => void)[];
}

const gates = new Map<string, Gate>();

/** Waits for a place among `limit` calls of `tool`; answers what gives it back. */
export async function toolSlot(tool: string, limit: number, signal: AbortSignal): Promise<() => void> {
  let gate = gates.get(tool);
  if (!gate) gates.set(tool, (gate = { active: 0, waiting: [] }));
  const g = gate;
  if (g.active >= limit) {
    await new Promise<void>((resolve, reject) => {
      const go = (): void => {
        signal.removeEventListener('abort', stop);
        resolve();
      };
      const stop = (): void => {
        const i = g.waiting.indexOf(go);
        if (i >= 0) g.waiting.splice(i, 1);
        reject(new ToolError('aborted', 'run aborted'));
      };
      if (signal.aborted) return stop();
      signal.addEventListener('abort', stop, { once: true });
      g.waiting.push(go);
    });
  } else g.active++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const next = g.waiting.shift();
    // The place passes straight to the next caller; with none, it is free.
    if (next) next();
    else g.active--;
  };
}
