export {
  TetraloopClient,
  SessionsClient,
  RunWaitTimeoutError,
  unwrap,
  type TetraloopClientOptions,
  type TranscriptPage,
  type WaitOptions,
} from './client.js';
export { TetraloopApiError, TetraloopNotJsonError, TetraloopUnreachableError } from './errors.js';
export * from './graph/index.js';
export { parseSseBlock, type EventsOptions, type SseMessage } from './events.js';
export type * from './types.js';
export type { paths, components, operations } from './generated/openapi.js';
