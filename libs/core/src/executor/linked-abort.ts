/**
 * One call's abort signal: aborted when any of its sources is (a run's shared signal, a shutdown)
 * or when its time limit passes. Unlike `AbortSignal.any`, which leaves an entry on each source
 * for every signal made from it (on Node 20, after the call is done too), `release` takes
 * everything off again: the sources live as long as a run or the process, and a run makes many
 * calls.
 */
export interface LinkedAbort {
  readonly signal: AbortSignal;
  /** Whether it was the time limit that aborted it. */
  timedOut(): boolean;
  /** Unhooks it from its sources and stops its timer; call it once the call is done. */
  release(): void;
}

export function linkedAbort(sources: readonly AbortSignal[], timeoutMs: number): LinkedAbort {
  const controller = new AbortController();
  let timedOut = false;
  const onAbort = function (this: AbortSignal): void {
    controller.abort(this.reason);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new DOMException(`timed out after ${timeoutMs} ms`, 'TimeoutError'));
  }, timeoutMs);
  const release = (): void => {
    clearTimeout(timer);
    for (const source of sources) source.removeEventListener('abort', onAbort);
  };
  for (const source of sources) {
    if (source.aborted) {
      controller.abort(source.reason);
      break;
    }
    source.addEventListener('abort', onAbort, { once: true });
  }
  if (controller.signal.aborted) release();
  return { signal: controller.signal, timedOut: () => timedOut, release };
}
