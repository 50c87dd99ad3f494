/**
 * Content-addressed blobs: a node output whose JSON text is large is stored once under its
 * SHA-256, and the snapshot holds a stub in its place. The stub's shape and its checks only.
 */

/** How a blob is named in a stub: `sha256:` and 64 lowercase hex digits. */
export const BLOB_HASH = /^sha256:[0-9a-f]{64}$/;

/** Characters of a blob's content a stub shows. */
export const BLOB_PREVIEW_CHARS = 200;

/** What a snapshot holds in place of a large output. */
export interface BlobStub {
  /** `sha256:<hex>` of the output's JSON text. */
  readonly $blob: string;
  /** Length of the JSON text in UTF-8 bytes. */
  readonly bytes: number;
  /** The first 200 characters of the JSON text (of the string itself, for a string output). */
  readonly preview: string;
}

/**
 * Whether `value` is a stub: an object of exactly `$blob` (a well-formed hash), `bytes` and
 * `preview`. A node output of this shape is always stored as a blob, so a stub in a snapshot
 * always stands for a blob.
 */
export function isBlobStub(value: unknown): value is BlobStub {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.$blob === 'string' &&
    BLOB_HASH.test(v.$blob) &&
    typeof v.bytes === 'number' &&
    typeof v.preview === 'string' &&
    Object.keys(v).length === 3
  );
}

/** The hex digest named by `sha256:<hex>` or by the bare hex; null for anything else. */
export function blobHexOf(hash: string): string | null {
  const hex = hash.startsWith('sha256:') ? hash.slice('sha256:'.length) : hash;
  return /^[0-9a-f]{64}$/.test(hex) ? hex : null;
}

/** The first {@link BLOB_PREVIEW_CHARS} characters of `text`, never ending inside a surrogate pair. */
export function blobPreview(text: string): string {
  if (text.length <= BLOB_PREVIEW_CHARS) return text;
  const cut = text.slice(0, BLOB_PREVIEW_CHARS);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}
