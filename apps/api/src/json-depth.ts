/**
 * How deeply a JSON text nests, found by one pass over its bytes before anything parses it:
 * brackets are counted outside strings (a `"` opens or closes one unless escaped). A body nested
 * hundreds of thousands of levels deep parses, then overflows the stack of whatever walks it
 * (schema checks, `JSON.stringify`); it is refused here instead, with the limit named. The pass
 * reads bytes as UTF-8, so a body is taken in UTF-8 only: in UTF-16 a character such as U+2200
 * holds the byte of a quote, and everything after it would read as inside a string. Pure.
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

/** A JSON body in a charset other than UTF-8; the API answers `415 unsupported_charset`. */
export class JsonCharsetError extends Error {
  /** body-parser's own type for a charset it refuses: both map to one answer. */
  readonly type = 'charset.unsupported';
  constructor(readonly charset: string) {
    super(`the body is ${charset}: send JSON as UTF-8`);
    this.name = 'JsonCharsetError';
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

/**
 * Refuses a JSON body before it is parsed: one not in UTF-8 (`charset` as the request declares it,
 * lower-case; body-parser's default is `utf-8`), then one nesting deeper than `limit`. The depth is
 * only ever counted on UTF-8 bytes, whatever the request says its charset is.
 */
export function checkJsonBody(bytes: Uint8Array, charset: string, limit: number): void {
  if (charset !== 'utf-8') throw new JsonCharsetError(charset);
  if (nestsDeeperThan(bytes, limit)) throw new JsonTooDeepError(limit);
}
