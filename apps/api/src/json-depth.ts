/**
 * How deeply a JSON text nests, found by one pass over its bytes before anything parses it:
 * brackets are counted outside strings (a `"` opens or closes one unless escaped). A body nested
 * hundreds of thousands of levels deep parses, then overflows the stack of whatever walks it
 * (schema checks, `JSON.stringify`); it is refused here instead, with the limit named. Pure.
 */

/** Nesting a request body may have when the deployment sets none. */
export const DEFAULT_JSON_MAX_DEPTH = 64;

/** A body nested deeper than the limit; the API answers `400 json_too_deep`. */
export class JsonTooDeepError extends Error {
  readonly type = 'entity.too.deep';
  constructor(readonly limit: number) {
    super(`the body nests deeper than ${limit} levels (TETRALOOP_JSON_MAX_DEPTH)`);
    this.name = 'JsonTooDeepError';
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** True when the JSON text in `bytes` opens more than `limit` arrays or objects inside each other. */
export function nestsDeeperThan(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) {
      inString = true;
    } else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}
