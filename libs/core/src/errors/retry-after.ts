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

/** A header reader: `Headers`, or a plain record of lower-case names. */
export type HeaderSource =
  { get(name: string): string | null | undefined } | Record<string, string | undefined>;

const headerOf = (headers: HeaderSource, name: string): string | null | undefined =>
  typeof (headers as { get?: unknown }).get === 'function'
    ? (headers as { get(name: string): string | null | undefined }).get(name)
    : (headers as Record<string, string | undefined>)[name];

/**
 * A provider's rate-limit reset as a duration (`1s`, `6m0s`, `20ms`, `1.5s`, or plain seconds), in
 * ms (clamped like `Retry-After`); absent when unreadable.
 */
export function parseResetDuration(value: string | null | undefined): number | undefined {
  if (value === undefined || value === null) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.min(RETRY_AFTER_CEILING_MS, Math.round(Number(text) * 1000));
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) return undefined;
  const unit = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 } as const;
  const ms = parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2] as keyof typeof unit], 0);
  return Math.min(RETRY_AFTER_CEILING_MS, Math.round(ms));
}

/**
 * How long a provider asks everyone to hold off, from its headers: `retry-after-ms`, then
 * `Retry-After`, then — when `x-ratelimit-remaining-requests` or `-tokens` is 0 — the matching
 * `x-ratelimit-reset-*`. Absent when the headers say nothing.
 */
export function providerHoldOffMs(
  headers: HeaderSource | undefined,
  now: number = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const ms = Number(headerOf(headers, 'retry-after-ms'));
  if (headerOf(headers, 'retry-after-ms') && Number.isFinite(ms) && ms >= 0)
    return Math.min(RETRY_AFTER_CEILING_MS, Math.round(ms));
  const after = parseRetryAfter(headerOf(headers, 'retry-after'), now).retryAfterMs;
  if (after !== undefined) return after;
  let hold: number | undefined;
  for (const what of ['requests', 'tokens']) {
    if (headerOf(headers, `x-ratelimit-remaining-${what}`)?.trim() !== '0') continue;
    const reset = parseResetDuration(headerOf(headers, `x-ratelimit-reset-${what}`));
    if (reset !== undefined) hold = Math.max(hold ?? 0, reset);
  }
  return hold;
}
