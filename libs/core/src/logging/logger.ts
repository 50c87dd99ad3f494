import { pino, type Logger, type LevelWithSilent } from 'pino';

export type Layer = 'sense' | 'plan' | 'tool' | 'reflect' | 'api' | 'cli';
export type { Logger };

/** Fields that never reach a log line in clear. */
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  '*.apiKey',
  '*.password',
  '*.token',
];

/** JSON logs with the loop (`layer`) on every line; run/node ids are added by child loggers. */
export function createLogger(options: { level: LevelWithSilent; layer: Layer }): Logger {
  return pino({
    level: options.level,
    base: { layer: options.layer },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
