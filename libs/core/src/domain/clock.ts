/**
 * Now, as the ISO string a run document's timestamps are. Formatted once per millisecond: a node's
 * steps ask several times within one.
 */
let lastInstant = { ms: Number.NaN, iso: '' };

export const nowIso = (): string => {
  const ms = Date.now();
  if (ms !== lastInstant.ms) lastInstant = { ms, iso: new Date(ms).toISOString() };
  return lastInstant.iso;
};
