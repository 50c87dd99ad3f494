/**
 * `Retry-After` as a delay. A server's header is outside input: a number of seconds too large
 * (`1e300`) or a date far away would make a delay no timer or date can hold, so the delay is
 * clamped to a ceiling here, where it is parsed, and again to the deployment's own ceiling where
 * the retry is scheduled (`retryDelay`). Pure.
 */

/** The longest delay a `Retry-After` is read as: one day, the longest run deadline. */
export const RETRY_AFTER_CEILING_MS = 86_400_000;

/** The delay a `Retry-After` value asks for, in ms (0 ≤ delay ≤ the ceiling); absent when unreadable. */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
): { retryAfterMs?: number } {
  if (value === undefined || value === null || value.trim() === '') return {};
  const seconds = Number(value);
  let ms: number;
  if (!Number.isNaN(seconds)) {
    if (seconds < 0) return {};
    ms = seconds * 1000;
  } else {
    const date = Date.parse(value);
    if (Number.isNaN(date)) return {};
    ms = date - now;
  }
  return { retryAfterMs: Math.round(Math.min(RETRY_AFTER_CEILING_MS, Math.max(0, ms))) };
}
