/** Largest `timeoutMs` of `/wait` unless `TETRALOOP_MAX_WAIT_MS` says otherwise. */
export const DEFAULT_MAX_WAIT_MS = 300_000;
