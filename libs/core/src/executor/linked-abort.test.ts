import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { linkedAbort } from './linked-abort.js';

afterEach(() => vi.useRealTimers());

describe('a call’s linked abort', () => {
  it('aborts with a source, with its reason, and not as a timeout', () => {
    const run = new AbortController();
    const call = linkedAbort([run.signal], 60_000);
    run.abort(new Error('run aborted'));
    expect(call.signal.aborted).toBe(true);
    expect((call.signal.reason as Error).message).toBe('run aborted');
    expect(call.timedOut()).toBe(false);
    call.release();
  });

  it('aborts when its time limit passes, as a timeout', () => {
    vi.useFakeTimers();
    const call = linkedAbort([new AbortController().signal], 1_000);
    vi.advanceTimersByTime(999);
    expect(call.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(call.signal.aborted).toBe(true);
    expect(call.timedOut()).toBe(true);
    expect((call.signal.reason as DOMException).name).toBe('TimeoutError');
    call.release();
  });

  it('leaves nothing on its sources once released, and no timer', () => {
    vi.useFakeTimers();
    const run = new AbortController();
    const shutdown = new AbortController();
    const calls = Array.from({ length: 100 }, () => linkedAbort([run.signal, shutdown.signal], 1_000));
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(100);
    for (const call of calls) call.release();
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(0);
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
    expect(vi.getTimerCount()).toBe(0);
    run.abort();
    expect(calls.some((c) => c.signal.aborted)).toBe(false);
  });

  it('starts aborted when a source already is, holding nothing', () => {
    vi.useFakeTimers();
    const run = new AbortController();
    run.abort(new Error('gone'));
    const call = linkedAbort([run.signal], 1_000);
    expect(call.signal.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
