/**
 * The cursor of a list read from a sorted-set index newest first, pure: where a page ended (the
 * last entry's score and id), handed to the client as an opaque, URL-safe string. The next page
 * starts after that entry, so entries added meanwhile with newer scores never shift a page.
 */

/** The last entry of a page: its score in the index (epoch ms) and its member. */
export interface IndexCursor {
  readonly score: number;
  readonly id: string;
}

/** A cursor as the API hands it out. */
export function encodeCursor(cursor: IndexCursor): string {
  return Buffer.from(`${cursor.score}:${cursor.id}`).toString('base64url');
}

/**
 * The cursor `text` stands for, or undefined when it is not one the API handed out: its id must
 * match `id` (the members of the index it pages).
 */
export function decodeCursor(text: string, id: RegExp): IndexCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(text)) return undefined;
  const match = /^(\d{1,16}):(.+)$/s.exec(Buffer.from(text, 'base64url').toString());
  if (!match || !id.test(match[2]!)) return undefined;
  const score = Number(match[1]);
  return Number.isSafeInteger(score) ? { score, id: match[2]! } : undefined;
}
