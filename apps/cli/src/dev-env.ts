/**
 * What `tetraloop dev` itself reads (the API and the pools it starts parse their own): where its
 * embedded Redis keeps its data, and how that Redis fsyncs.
 */
import { APPENDFSYNC_POLICIES, parseEnv } from '@tetraloop/core';
import { z } from 'zod';

export const DevEnv = z.object({
  /** Set: `dev` uses this Redis and starts none. */
  REDIS_URL: z
    .string()
    .optional()
    .transform((v) => (v === '' ? undefined : v)),
  /** The embedded Redis keeps its AOF in `<dir>/redis`. */
  TETRALOOP_DATA_DIR: z.string().min(1).default('.tetraloop'),
  /**
   * The embedded Redis' AOF fsync: `everysec` (a crash of the machine can lose about the last
   * second of writes) or `always` (fsync before each write is answered: slower, nothing lost).
   */
  TETRALOOP_REDIS_APPENDFSYNC: z.enum(APPENDFSYNC_POLICIES).default('everysec'),
});
export type DevEnv = z.infer<typeof DevEnv>;

export function parseDevEnv(env: Record<string, string | undefined>): DevEnv {
  return parseEnv(DevEnv, env);
}
