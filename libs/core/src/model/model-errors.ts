/** Maps what the `openai` SDK throws to Tetraloop's error classes, by type and status. */
import type OpenAI from 'openai';
import type { NodeErrorData } from '../errors/node-error.js';
import { providerHoldOffMs } from '../errors/retry-after.js';

/** The delay a provider asks for: `retry-after-ms`, `Retry-After` or an exhausted limit's reset. */
const retryAfterMs = (headers: Headers | undefined): { retryAfterMs?: number } => {
  const ms = providerHoldOffMs(headers);
  return ms === undefined ? {} : { retryAfterMs: ms };
};

/** `sdk`: the SDK's class, loaded (its error classes are its static members). */
export function classifyModelError(err: unknown, sdk: typeof OpenAI): NodeErrorData {
  if (err instanceof sdk.APIUserAbortError) return { code: 'aborted', message: 'model call aborted' };
  if (err instanceof sdk.APIConnectionTimeoutError) return { code: 'timeout', message: err.message };
  if (err instanceof sdk.APIConnectionError) return { code: 'network', message: err.message };
  if (err instanceof sdk.APIError) {
    // The SDK types these fields generically; read them as what they are.
    const { status, headers } = err as { status: number | undefined; headers: Headers | undefined };
    const message = `model API ${status ?? ''}: ${err.message}`.trim();
    if (status === 429) return { code: 'rate_limited', message, status, ...retryAfterMs(headers) };
    if (status === 401 || status === 403) return { code: 'auth', message, status };
    if (status !== undefined && status >= 500)
      return { code: 'server', message, status, ...retryAfterMs(headers) };
    return { code: 'validation', message, ...(status !== undefined ? { status } : {}) };
  }
  return { code: 'internal', message: err instanceof Error ? err.message : String(err) };
}

const RETRYABLE = new Set<NodeErrorData['code']>(['network', 'timeout', 'rate_limited', 'server']);
export const isRetryableModelError = (error: NodeErrorData): boolean => RETRYABLE.has(error.code);
