/** Configuration of the API process, parsed once at boot. */
import { BaseEnv, parseEnv } from '@tetraloop/core';
import { z } from 'zod';

export const ApiEnv = BaseEnv.extend({
  PORT: z.coerce.number().int().min(0).max(65_535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  /** Largest accepted request body, in bytes. */
  TETRALOOP_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(1024 * 1024),
  /** Longest `wait` a client may ask for. */
  TETRALOOP_MAX_WAIT_MS: z.coerce.number().int().positive().default(300_000),
});
export type ApiEnv = z.infer<typeof ApiEnv>;

export const parseApiEnv = (env: Record<string, string | undefined> = process.env): ApiEnv =>
  parseEnv(ApiEnv, env);
