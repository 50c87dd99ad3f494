/**
 * What `tetraloop dev` itself reads (the API and the pools it starts parse their own): whether a
 * Redis is given, where its embedded Redis and its own secret key are kept, and how that Redis fsyncs.
 */
import { envSchema, parseEnv, setting, type Settings } from '@tetraloop/core/config';
import { APPENDFSYNC_POLICIES } from '@tetraloop/core/runtime';
import { z } from 'zod';

export const DEV_SETTINGS = {
  TETRALOOP_DATA_DIR: setting({
    group: 'dev',
    file: 'dev.dataDir',
    readBy: ['dev'],
    doc: 'The embedded Redis keeps its AOF in `<dir>/redis`; when `TETRALOOP_SECRET_KEY` is unset, dev makes a secret key of its own in `<dir>/secret-key` (mode 0600) on its first start and uses it on every later one.',
    schema: z.string().min(1).default('.tetraloop'),
  }),
  TETRALOOP_REDIS_APPENDFSYNC: setting({
    group: 'dev',
    file: 'dev.redisAppendfsync',
    readBy: ['dev'],
    doc: "The embedded Redis' AOF fsync: `everysec` (a crash of the machine can lose about the last second of writes) or `always` (fsync before each write is answered: slower, nothing lost).",
    schema: z.enum(APPENDFSYNC_POLICIES).default('everysec'),
  }),
} satisfies Settings;
export const DevEnv = envSchema(DEV_SETTINGS);
export type DevEnv = z.infer<typeof DevEnv> & {
  /** Set: `dev` uses this Redis and starts none (the setting is the shared `REDIS_URL`). */
  readonly REDIS_URL: string | undefined;
};

export function parseDevEnv(env: Record<string, string | undefined>): DevEnv {
  return { ...parseEnv(DevEnv, env), REDIS_URL: env.REDIS_URL === '' ? undefined : env.REDIS_URL };
}
