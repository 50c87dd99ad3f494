/**
 * Redis Cluster's slot of a key (CRC16-XMODEM of its hash tag, or of the whole key, mod 16384), so
 * Tetraloop can group commands by slot and pick hash tags that land on distinct slot ranges. Pure.
 */

export const SLOT_COUNT = 16_384;

const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/** The part of `key` Redis hashes: the text between the first `{` and the next `}`, when not empty. */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  return close <= open + 1 ? key : key.slice(open + 1, close);
}

export const keySlot = (key: string): number => crc16(Buffer.from(hashTagOf(key), 'utf8')) % SLOT_COUNT;
