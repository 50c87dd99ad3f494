/** Job names of the sense queue (L1). */
export const SENSE_JOB = {
  /** A message to a session: dedupe, command or lane admission. */
  message: 'message',
  /** An event from a source (webhook or poll): normalise, dedupe, burst-merge, environment. */
  event: 'event',
  /** A burst window closed: merge its events into one. */
  burstFlush: 'burst-flush',
  /** Move a session's lane on (collected messages whose debounce passed). */
  laneAdvance: 'lane-advance',
  /** Periodic: move lanes a dead process left behind. */
  laneSweep: 'lane-sweep',
  /** Periodic per polled source: fetch it. */
  poll: 'poll',
} as const;
