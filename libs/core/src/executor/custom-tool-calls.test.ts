import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToolError } from '../errors/node-error.js';
import { thrownError } from './invoke-tool.js';
import { toolSlot } from './tool-concurrency.js';

describe('what a tool throws', () => {
  it('keeps a ToolError’s class; a network failure of fetch is network; anything else internal', async () => {
    expect(thrownError(new ToolError('rate_limited', 'busy', { retryAfterMs: 2000 }))).toEqual({
      code: 'rate_limited',
      message: 'busy',
      retryAfterMs: 2000,
    });
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await fetch(`http://127.0.0.1:${port}/`).catch((err: unknown) => err);
    expect(thrownError(refused)).toMatchObject({
      code: 'network',
      message: expect.stringContaining('ECONNREFUSED'),
    });
    const badPort = await fetch('http://127.0.0.1:1/').catch((err: unknown) => err);
    expect(thrownError(badPort)).toEqual({ code: 'network', message: 'fetch failed (bad port)' });
    expect(thrownError(new Error('a plain bug'))).toEqual({ code: 'internal', message: 'a plain bug' });
    expect(thrownError(z.string().safeParse(1).error)).toMatchObject({ code: 'validation' });
  });
});

describe('a tool’s concurrency in one process', () => {
  it('lets `limit` calls in at once; the next waits for one to end, or for its run’s abort', async () => {
    const run = new AbortController();
    const first = await toolSlot('t.slots', 1, run.signal);
    let second: (() => void) | undefined;
    const waiting = toolSlot('t.slots', 1, run.signal).then((r) => (second = r));
    const aborted = new AbortController();
    const third = toolSlot('t.slots', 1, aborted.signal);
    await Promise.resolve();
    expect(second).toBeUndefined();
    aborted.abort();
    await expect(third).rejects.toMatchObject({ code: 'aborted' });
    first();
    await waiting;
    expect(second).toBeTypeOf('function');
    second!();
  });
});
