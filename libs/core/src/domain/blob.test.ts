import { describe, expect, it } from 'vitest';
import { blobHexOf, blobPreview, isBlobStub } from './blob.js';

const hex = 'ab'.repeat(32);

describe('blob stubs', () => {
  it('are exactly {$blob, bytes, preview} with a well-formed hash', () => {
    expect(isBlobStub({ $blob: `sha256:${hex}`, bytes: 3, preview: 'abc' })).toBe(true);
    expect(isBlobStub({ $blob: `sha256:${hex}`, bytes: 3 })).toBe(false);
    expect(isBlobStub({ $blob: `sha256:${hex}`, bytes: 3, preview: 'abc', more: 1 })).toBe(false);
    expect(isBlobStub({ $blob: hex, bytes: 3, preview: 'abc' })).toBe(false);
    expect(isBlobStub({ $blob: `sha256:${hex.toUpperCase()}`, bytes: 3, preview: 'abc' })).toBe(false);
    expect(isBlobStub([`sha256:${hex}`])).toBe(false);
    expect(isBlobStub(null)).toBe(false);
  });

  it('are named by sha256:<hex> or the bare hex', () => {
    expect(blobHexOf(`sha256:${hex}`)).toBe(hex);
    expect(blobHexOf(hex)).toBe(hex);
    for (const bad of ['', 'sha256:', hex.slice(1), `${hex}0`, hex.toUpperCase(), `md5:${hex}`]) {
      expect(blobHexOf(bad)).toBeNull();
    }
  });

  it('preview 200 characters, never half a surrogate pair', () => {
    expect(blobPreview('short')).toBe('short');
    expect(blobPreview('a'.repeat(300))).toBe('a'.repeat(200));
    const cut = blobPreview(`${'a'.repeat(199)}😀tail`);
    expect(cut).toBe('a'.repeat(199));
  });
});
