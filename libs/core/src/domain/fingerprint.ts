/**
 * Fingerprints at hand-offs: the sha256 of a value's canonical JSON (RFC 8785, via `canonicalize`),
 * recorded where one layer hands work to the next (a node's resolved input and its output, what a
 * planner was given), so a drift between layers can be found by comparing hashes. Pure.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { setOwn } from '../graph/references.js';
import type { NodeSnapshot } from './node-snapshot.js';

/** An object key that is an array index: JavaScript lists such keys first, in numeric order. */
const INDEX_KEY = /^(?:0|[1-9]\d*)$/;
/** A lone surrogate as `JSON.stringify` writes it: `\udXXX` after an even run of backslashes. */
const LONE_SURROGATE = /(?<!\\)(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/i;

/**
 * The value's canonical JSON: object keys sorted, numbers and strings as RFC 8785 writes them.
 * Whatever `JSON.stringify` would drop or change (undefined members, `NaN`) is dropped or changed
 * the same way first, so the text is that of the value as stored.
 *
 * One `JSON.stringify` whose replacer hands over each object with its keys sorted: RFC 8785 writes
 * numbers and strings as it does, so only the key order differs. Three cases go through
 * `canonicalize` instead: an object with an array-index key (an object lists those first, whatever
 * order they are set in), an object that is not a plain one (a boxed primitive, a class instance)
 * and a lone surrogate, which canonical JSON cannot write (it throws). Every node's input and output
 * is fingerprinted, so the common case costs one serialization.
 */
export function canonicalJson(value: unknown): string {
  let fallback = false;
  const text = JSON.stringify(value, (_key, member: unknown) => {
    if (member === null || typeof member !== 'object' || Array.isArray(member) || fallback) return member;
    // Only a plain object is copied sorted: JSON.stringify unwraps a boxed primitive (`new
    // Number(1)`) after the replacer, which a copy would lose, so any other goes the long way.
    const proto: unknown = Object.getPrototypeOf(member);
    const keys = proto === Object.prototype || proto === null ? Object.keys(member) : undefined;
    if (!keys || keys.some((key) => INDEX_KEY.test(key))) {
      fallback = true;
      return member;
    }
    keys.sort();
    const sorted: Record<string, unknown> = {};
    for (const key of keys) setOwn(sorted, key, (member as Record<string, unknown>)[key]);
    return sorted;
  });
  if (text === undefined) return 'null';
  if (!fallback && !LONE_SURROGATE.test(text)) return text;
  return canonicalize(JSON.parse(text) as unknown) ?? 'null';
}

/**
 * The hex sha256 of `value`'s canonical JSON; undefined for a value canonical JSON cannot write (a
 * string holding a lone surrogate), which then has no fingerprint rather than a wrong one.
 */
export function fingerprint(value: unknown): string | undefined {
  return measuredFingerprint(value)?.sha256;
}

/**
 * The fingerprint and the UTF-8 size of the canonical JSON it hashes, which is that of the value's
 * `JSON.stringify` (the same members written the same way, in another key order).
 */
function measuredFingerprint(value: unknown): { sha256: string; bytes: number } | undefined {
  let text: string;
  try {
    text = canonicalJson(value);
  } catch {
    return undefined;
  }
  return { sha256: createHash('sha256').update(text).digest('hex'), bytes: Buffer.byteLength(text) };
}

/** The JSON sizes of a snapshot's input and output, in bytes, as `withFingerprints` found them. */
export interface SnapshotSizes {
  input?: number;
  output?: number;
}

/**
 * The snapshot with the fingerprints of its input and output (of the values, before any blob
 * stub). `sizes`, when given, gets the JSON size of each value fingerprinted, so whoever stores
 * the snapshot need not serialize a small value again to learn it is small.
 */
export function withFingerprints(snapshot: NodeSnapshot, sizes?: SnapshotSizes): NodeSnapshot {
  const input = snapshot.input === undefined ? undefined : measuredFingerprint(snapshot.input);
  const output = snapshot.output === undefined ? undefined : measuredFingerprint(snapshot.output);
  const fingerprinted = { ...snapshot };
  if (input !== undefined) fingerprinted.inputSha256 = input.sha256;
  if (output !== undefined) fingerprinted.outputSha256 = output.sha256;
  if (sizes) {
    if (input !== undefined) sizes.input = input.bytes;
    if (output !== undefined) sizes.output = output.bytes;
  }
  return fingerprinted;
}
