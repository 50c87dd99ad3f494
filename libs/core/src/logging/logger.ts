import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';
import { redactor } from './redact.js';

export type Layer = 'sense' | 'plan' | 'tool' | 'reflect' | 'api' | 'cli';
export type { DestinationStream, Logger };

/**
 * JSON logs with the loop (`layer`) on every line; runId, nodeId, attempt and sessionKey are added
 * by child loggers where they apply. Credentials are redacted by field name, in any case and at any
 * depth (see `redact.ts`); `redact` adds configured field names to the built-in list.
 */
export function createLogger(
  options: { level: LevelWithSilent; layer: Layer; redact?: readonly string[] },
  destination?: DestinationStream,
): Logger {
  const redact = redactor(options.redact ?? []);
  return pino(
    {
      level: options.level,
      base: { layer: options.layer },
      // Each line's own fields; child-logger bindings (ids) are written as given.
      formatters: { log: redact },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    ...(destination ? [destination] : []),
  );
}
