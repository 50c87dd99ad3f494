/**
 * Fingerprints at hand-offs: the sha256 of a value's canonical JSON (RFC 8785, via `canonicalize`),
 * recorded where one layer hands work to the next (a node's resolved input and its output, what a
 * planner was given), so a drift between layers can be found by comparing hashes. Pure.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { NodeSnapshot } from './node-snapshot.js';

/**
 * The value's canonical JSON: object keys sorted, numbers and strings as RFC 8785 writes them.
 * Whatever `JSON.stringify` would drop or change (undefined members, `NaN`) is dropped or changed
 * the same way first, so the text is that of the value as stored.
 */
export function canonicalJson(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? 'null' : (canonicalize(JSON.parse(text) as unknown) ?? 'null');
}

/**
 * The hex sha256 of `value`'s canonical JSON; undefined for a value canonical JSON cannot write (a
 * string holding a lone surrogate), which then has no fingerprint rather than a wrong one.
 */
export function fingerprint(value: unknown): string | undefined {
  let text: string;
  try {
    text = canonicalJson(value);
  } catch {
    return undefined;
  }
  return createHash('sha256').update(text).digest('hex');
}

/** The snapshot with the fingerprints of its input and output (of the values, before any blob stub). */
export function withFingerprints(snapshot: NodeSnapshot): NodeSnapshot {
  const inputSha256 = snapshot.input === undefined ? undefined : fingerprint(snapshot.input);
  const outputSha256 = snapshot.output === undefined ? undefined : fingerprint(snapshot.output);
  const fingerprinted = { ...snapshot };
  if (inputSha256 !== undefined) fingerprinted.inputSha256 = inputSha256;
  if (outputSha256 !== undefined) fingerprinted.outputSha256 = outputSha256;
  return fingerprinted;
}
