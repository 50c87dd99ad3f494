/**
 * Run ids derived from names: the same parts always give the same id, so whoever computes it
 * again (a redelivered loop job, a client's retry with the same Idempotency-Key) finds the run
 * made the first time instead of making another.
 */
import { createHash } from 'node:crypto';

/** A UUID-shaped id derived from `parts` (name-based, like UUID v5, from SHA-256). */
export function derivedRunId(...parts: (string | number)[]): string {
  const hex = createHash('sha256').update(parts.join('\u0000')).digest('hex');
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The id of the run an `Idempotency-Key` names within its tenant. Every request with the same key
 * computes the same id, so the create script alone decides which request made the run: no claim
 * key is written beside it. The namespace keeps these ids apart from child runs' ids.
 */
export const idempotentRunId = (tenant: string, clientKey: string): string =>
  derivedRunId('idempotency-key', tenant, clientKey);
