import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';

export type Layer = 'sense' | 'plan' | 'tool' | 'reflect' | 'api' | 'cli';
export type { Logger };

/** Fields that never reach a log line in clear: credentials wherever they appear. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.authorization',
  '*.apiKey',
  '*.api_key',
  '*.password',
  '*.token',
  '*.secret',
  '*.OPENAI_API_KEY',
  'OPENAI_API_KEY',
  '*.TETRALOOP_ADMIN_TOKEN',
];

/**
 * JSON logs with the loop (`layer`) on every line; runId, nodeId, attempt and sessionKey are added
 * by child loggers where they apply. `redact` adds configured secret fields to the built-in list.
 */
export function createLogger(
  options: { level: LevelWithSilent; layer: Layer; redact?: readonly string[] },
  destination?: DestinationStream,
): Logger {
  return pino(
    {
      level: options.level,
      base: { layer: options.layer },
      redact: { paths: [...REDACTED_PATHS, ...(options.redact ?? [])], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    ...(destination ? [destination] : []),
  );
}
