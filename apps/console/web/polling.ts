/**
 * How a list page reads what it shows: once now, then again every few seconds while it is on the
 * page (nothing streams a list's changes). Each read is numbered, so the answer to an older read
 * (an earlier filter) never overwrites a newer one, and a read asked for meanwhile (after an
 * action) restarts the wait.
 */
export interface Polled<T> {
  readonly everyMs: number;
  /** The element whose presence keeps the polling on: a page replaced (the key form after a 401) stops it. */
  readonly shown: Element;
  readonly read: () => Promise<T>;
  readonly draw: (answer: T) => void;
  readonly failed: (err: unknown) => void;
}

/** Starts polling; answers the function that reads again now. */
export function polling<T>(polled: Polled<T>): () => Promise<void> {
  let timer: number | undefined;
  let generation = 0;
  async function refresh(): Promise<void> {
    clearTimeout(timer);
    const mine = ++generation;
    try {
      const answer = await polled.read();
      if (mine !== generation) return;
      polled.draw(answer);
    } catch (err) {
      if (mine !== generation) return;
      polled.failed(err);
    }
    if (mine === generation && polled.shown.isConnected) {
      timer = window.setTimeout(() => void refresh(), polled.everyMs);
    }
  }
  void refresh();
  return refresh;
}
