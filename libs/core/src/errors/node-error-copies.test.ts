/**
 * A tool module loads its own copy of `@tetraloop/sdk` (and so of this module and maybe of zod)
 * beside the copy the `tetraloop` command runs from its bundle: errors of the one are classified
 * by the other as they would be by their own.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isZodError, ToolError, toErrorData } from './node-error.js';

describe('errors from another copy of the module', () => {
  it('a ToolError of another copy is a ToolError here, and keeps its class', async () => {
    // A query makes the module load a second time: a copy with its own ToolError class.
    const copy = './node-error.js?another-copy';
    const other = (await import(/* @vite-ignore */ copy)) as typeof import('./node-error.js');
    expect(other.ToolError).not.toBe(ToolError);
    const err = new other.ToolError('rate_limited', 'busy', { retryAfterMs: 2000 });
    expect(err instanceof ToolError).toBe(true);
    expect(toErrorData(err)).toEqual({ code: 'rate_limited', message: 'busy', retryAfterMs: 2000 });
    expect(new Error('plain') instanceof ToolError).toBe(false);
  });

  it('a zod error of another zod is a validation error', () => {
    const foreign = Object.assign(new Error('bad'), {
      name: 'ZodError',
      issues: [{ code: 'custom', path: ['email'], message: 'not an e-mail' }],
    });
    expect(foreign instanceof z.ZodError).toBe(false);
    expect(isZodError(foreign)).toBe(true);
    expect(toErrorData(foreign)).toMatchObject({ code: 'validation' });
    expect(isZodError(new Error('plain'))).toBe(false);
  });
});
