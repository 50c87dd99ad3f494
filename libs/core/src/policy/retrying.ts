/**
 * Runs an operation of the process's own (not a job's: BullMQ retries those) until it succeeds,
 * with the retry policy's backoff between tries, for at most a given time or until the process
 * stops. For work that nothing else would redo once it is dropped, such as settling the run of a
 * root job that failed for good while Redis was away.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { DEFAULT_BACKOFF, retryDelay, type BackoffPolicy } from './retry-policy.js';

export interface RetryingOptions {
  /** No try starts later than this after the first. */
  readonly forMs: number;
  /** Stops the retries (the process shuts down): the last error is answered. */
  readonly signal?: AbortSignal;
  /** @defaultValue DEFAULT_BACKOFF (1 s doubling to 30 s, ±20 %) */
  readonly backoff?: BackoffPolicy;
  /** Whether a failure is worth another try (@defaultValue every failure is). */
  readonly retryIf?: (err: unknown) => boolean;
  /** Told of each failed try that will be retried, and after how long. */
  readonly onRetry?: (err: unknown, retry: number, delayMs: number) => void;
}

/** What the operation answered, or the error of its last try. */
export async function retrying<T>(operation: () => Promise<T>, options: RetryingOptions): Promise<T> {
  const until = Date.now() + options.forMs;
  for (let retry = 1; ; retry++) {
    try {
      return await operation();
    } catch (err) {
      const delayMs = retryDelay(retry, {}, options.backoff ?? DEFAULT_BACKOFF);
      if (options.signal?.aborted || Date.now() + delayMs > until) throw err;
      if (options.retryIf && !options.retryIf(err)) throw err;
      options.onRetry?.(err, retry, delayMs);
      // Woken early by a shutdown: the next try is the last.
      await delay(delayMs, undefined, options.signal ? { signal: options.signal } : {}).catch(
        () => undefined,
      );
    }
  }
}
