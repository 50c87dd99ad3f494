/**
 * `tetraloop keys …`: the operator makes, lists and revokes API keys. With `TETRALOOP_ADMIN_TOKEN`
 * set it asks the API at `TETRALOOP_API_URL` with that root token as its bearer; without it (or with
 * `--redis`) it reads and writes the keys in Redis directly (`REDIS_URL`, `TETRALOOP_PREFIX`), so
 * the first key can be made before any root token exists. A key's secret is printed once, on create.
 *
 * Exit codes: 0 done; 1 refused (no such key, the tenant's key limit, a request the API rejects);
 * 2 a usage error; 3 not authenticated or forbidden (the API answered 401 or 403); 4 the API or
 * Redis cannot be reached.
 */
import { UsageError, otherSubcommand, parsing } from './cli-args.js';
import { textTable } from './text-table.js';
import { parseArgs } from 'node:util';
import { ApiEnv, KeyBody } from '@tetraloop/api';
import { ConfigError, isClusterUrl, parseClusterUrl, parseEnv } from '@tetraloop/core/config';
import { DEFAULT_TENANT, SCOPES, TenantId } from '@tetraloop/core/domain';
import { connectRedisOnce } from '@tetraloop/core/runtime';
import { ApiKeyRecord, ApiKeyStore, KeyLimitError } from '@tetraloop/core/state';
import {
  TetraloopApiError,
  TetraloopNotJsonError,
  TetraloopUnreachableError,
  unwrap,
} from '@tetraloop/client';
import {
  DEFAULT_API_URL,
  authHint,
  clientOf,
  describeApiError,
  describeFailure,
  type ApiTarget,
} from './api-client.js';

export const KEYS_USAGE = `usage: tetraloop keys <command>

  create --scopes <scope,…> [--tenant <tenant>] [--name <name>] [--expires-at <ISO time>] [--json]
                                        make a key; its secret is printed once, never again
  list [--tenant <tenant>] [--json]     keys, their scopes and who made them, never their secrets
  revoke <keyId>                        revoke a key and every key it made: refused at once by
                                        every API process

  every command also takes --redis: use Redis directly even when TETRALOOP_ADMIN_TOKEN is set

Scopes: ${SCOPES.join(', ')}. The tenant defaults to ${DEFAULT_TENANT}.
With TETRALOOP_ADMIN_TOKEN set, the keys are managed through the API at TETRALOOP_API_URL
(default ${DEFAULT_API_URL}) with that root token; without it, in Redis directly at REDIS_URL
under TETRALOOP_PREFIX (default tetraloop) — how the first key is made.
Exit codes: 0 done, 1 refused, 2 usage, 3 not authenticated or forbidden, 4 API or Redis unreachable.`;

export interface KeysIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

const processIo = (): KeysIo => ({
  env: process.env,
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
});

/** The API or the store said no: exit 1. */
class RefusedError extends Error {}
/** The API answered 401 or 403: exit 3. */
class AuthError extends Error {}
/** The API or Redis cannot be reached: exit 4. */
class UnreachableError extends Error {}

const EXIT = { refused: 1, usage: 2, auth: 3, unreachable: 4 } as const;

/** What a key is made with (`POST /v1/keys`'s body). */
type KeyInput = ReturnType<typeof KeyBody.parse>;

/** Where the keys are: the API (with the root token) or Redis. */
interface KeysBackend {
  /** For messages: "the API at …" or "Redis at …". */
  readonly where: string;
  create(input: KeyInput & { tenant: string }): Promise<{ record: ApiKeyRecord; key: string }>;
  list(tenant?: string): Promise<ApiKeyRecord[]>;
  /** False when there is no such key. */
  revoke(keyId: string): Promise<boolean>;
  close(): Promise<void>;
}

/** Runs `tetraloop keys <args>`; answers the exit code. */
export async function keysCommand(args: readonly string[], io: KeysIo = processIo()): Promise<number> {
  try {
    const [command, ...rest] = args;
    switch (command) {
      case 'create':
        return await create(rest, io);
      case 'list':
        return await list(rest, io);
      case 'revoke':
        return await revoke(rest, io);
      default:
        return otherSubcommand(command, { command: 'keys', usage: KEYS_USAGE }, io.stdout);
    }
  } catch (err) {
    const code =
      err instanceof UsageError
        ? EXIT.usage
        : err instanceof RefusedError
          ? EXIT.refused
          : err instanceof AuthError
            ? EXIT.auth
            : err instanceof UnreachableError
              ? EXIT.unreachable
              : undefined;
    if (code === undefined) throw err;
    io.stderr(`${(err as Error).message}\n`);
    return code;
  }
}

const COMMON = { redis: { type: 'boolean', default: false } } as const;

async function create(args: readonly string[], io: KeysIo): Promise<number> {
  const { values, positionals } = parsing('keys create', () =>
    parseArgs({
      args: [...args],
      options: {
        ...COMMON,
        tenant: { type: 'string' },
        scopes: { type: 'string' },
        name: { type: 'string' },
        'expires-at': { type: 'string' },
        json: { type: 'boolean', default: false },
      },
      allowPositionals: true,
      strict: true,
    }),
  );
  if (positionals.length > 0) throw new UsageError(`keys create takes no arguments, got ${positionals[0]}`);
  if (values.scopes === undefined) {
    throw new UsageError(`keys create needs --scopes, some of: ${SCOPES.join(', ')}`);
  }
  const scopes = values.scopes
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0) {
    throw new UsageError(`keys create: unknown scope ${unknown.join(', ')} (scopes: ${SCOPES.join(', ')})`);
  }
  const body = KeyBody.safeParse({
    tenant: values.tenant ?? DEFAULT_TENANT,
    scopes,
    ...(values.name === undefined ? {} : { name: values.name }),
    ...(values['expires-at'] === undefined ? {} : { expiresAt: values['expires-at'] }),
  });
  if (!body.success) {
    const flag: Record<string, string> = { expiresAt: '--expires-at' };
    const issues = body.error.issues.map((i) => {
      const field = String(i.path[0] ?? '');
      return `  ${flag[field] ?? `--${field}`}: ${i.message}`;
    });
    throw new UsageError(`keys create: invalid options\n${issues.join('\n')}`);
  }
  const input = { ...body.data, tenant: body.data.tenant ?? DEFAULT_TENANT };
  const made = await withBackend(values.redis, io, (keys) => keys.create(input));
  const { record, key } = made.value;
  if (values.json) {
    io.stdout(`${JSON.stringify({ ...record, key }, null, 2)}\n`);
  } else {
    io.stdout(`${key}\n`);
    io.stderr(
      `key ${record.keyId} made in ${made.where}: tenant ${record.tenant}, scopes ${record.scopes.join(',')}` +
        `${record.name ? `, name ${record.name}` : ''}${record.expiresAt ? `, expires ${record.expiresAt}` : ''}\n`,
    );
  }
  io.stderr(
    'This key is shown only once: store it now (e.g. in your secret manager); it cannot be read back.\n',
  );
  return 0;
}

async function list(args: readonly string[], io: KeysIo): Promise<number> {
  const { values, positionals } = parsing('keys list', () =>
    parseArgs({
      args: [...args],
      options: { ...COMMON, tenant: { type: 'string' }, json: { type: 'boolean', default: false } },
      allowPositionals: true,
      strict: true,
    }),
  );
  if (positionals.length > 0) throw new UsageError(`keys list takes no arguments, got ${positionals[0]}`);
  const tenant = values.tenant;
  if (tenant !== undefined && !TenantId.safeParse(tenant).success) {
    throw new UsageError(
      `keys list: '${tenant}' is not a tenant (1–40 lower-case letters, digits or dashes)`,
    );
  }
  const { value: keys } = await withBackend(values.redis, io, (backend) => backend.list(tenant));
  if (values.json) {
    io.stdout(`${JSON.stringify({ keys }, null, 2)}\n`);
    return 0;
  }
  const where = tenant ? ` of tenant ${tenant}` : '';
  if (keys.length === 0) {
    io.stderr(`no keys${where}\n`);
    return 0;
  }
  io.stdout(keyTable(keys));
  io.stderr(`${keys.length} key${keys.length === 1 ? '' : 's'}${where}\n`);
  return 0;
}

async function revoke(args: readonly string[], io: KeysIo): Promise<number> {
  const { values, positionals } = parsing('keys revoke', () =>
    parseArgs({ args: [...args], options: { ...COMMON }, allowPositionals: true, strict: true }),
  );
  const [given, ...extra] = positionals;
  if (given === undefined) throw new UsageError('keys revoke needs a key id: tetraloop keys revoke <keyId>');
  if (extra.length > 0) throw new UsageError(`keys revoke takes one key id, got ${positionals.length}`);
  // A whole key names its id too (tl_<keyId>_<secret>).
  const keyId = /^tl_([0-9a-f]{16})_/.exec(given)?.[1] ?? given;
  if (!/^[0-9a-f]{16}$/.test(keyId)) {
    throw new UsageError(`keys revoke: '${given}' is not a key id (16 hex digits, as keys list shows)`);
  }
  const { value: revoked, where } = await withBackend(values.redis, io, (keys) => keys.revoke(keyId));
  if (!revoked) throw new RefusedError(`no key ${keyId} in ${where} (tetraloop keys list)`);
  io.stderr(`key ${keyId} revoked, with every key it made: every API process refuses them from now on\n`);
  return 0;
}

/** Opens the backend the environment (and `--redis`) chooses, runs `use`, and closes it. */
async function withBackend<T>(
  redis: boolean | undefined,
  io: KeysIo,
  use: (backend: KeysBackend) => Promise<T>,
): Promise<{ value: T; where: string }> {
  const token = io.env.TETRALOOP_ADMIN_TOKEN?.trim();
  const backend =
    !redis && token
      ? apiBackend({ url: io.env.TETRALOOP_API_URL ?? DEFAULT_API_URL, token })
      : await redisBackend(io);
  try {
    return { value: await use(backend), where: backend.where };
  } finally {
    await backend.close();
  }
}

function apiBackend(target: ApiTarget): KeysBackend {
  const client = clientOf(target);
  const where = `the API at ${client.baseUrl}`;
  /** Asks the API; a refused root token is exit 3, an API that is not there exit 4, a refusal exit 1. */
  const call = async <T>(ask: () => Promise<T>): Promise<T> => {
    try {
      return await ask();
    } catch (err) {
      if (err instanceof TetraloopUnreachableError)
        throw new UnreachableError(describeFailure(err, 'TETRALOOP_ADMIN_TOKEN'));
      if (err instanceof TetraloopNotJsonError) throw new RefusedError(err.message);
      if (!(err instanceof TetraloopApiError)) throw err;
      if (err.status === 401 || err.status === 403) {
        const said = describeApiError(err, 'TETRALOOP_ADMIN_TOKEN').split('\n')[0];
        throw new AuthError(
          `${said}\n${authHint(err.status, 'TETRALOOP_ADMIN_TOKEN')}` +
            (err.status === 401
              ? ' — the root token the API runs with; or unset it and use --redis with REDIS_URL'
              : ''),
        );
      }
      throw new RefusedError(describeApiError(err, 'TETRALOOP_ADMIN_TOKEN'));
    }
  };
  return {
    where,
    async create(input) {
      const { key, ...record } = await call(async () =>
        unwrap(await client.api.POST('/v1/keys', { body: input })),
      );
      return { record: ApiKeyRecord.parse(record), key };
    },
    async list(tenant) {
      // The root token sees every tenant's keys.
      const { keys } = await call(async () => unwrap(await client.api.GET('/v1/keys')));
      const parsed = ApiKeyRecord.array().parse(keys);
      return tenant === undefined ? parsed : parsed.filter((k) => k.tenant === tenant);
    },
    revoke: (keyId) =>
      call(async () => {
        const answer = await client.api.DELETE('/v1/keys/{keyId}', { params: { path: { keyId } } });
        if (answer.response.status === 404) return false;
        unwrap(answer);
        return true;
      }),
    close: () => Promise.resolve(),
  };
}

/** A Redis URL without its password, for messages. */
function safeUrl(url: string): string {
  if (isClusterUrl(url)) {
    const { nodes, tls } = parseClusterUrl(url);
    return `${tls ? 'rediss' : 'redis'}+cluster://${nodes.map((n) => `${n.host}:${n.port}`).join(',')}`;
  }
  try {
    const u = new URL(url);
    u.password = '';
    u.username = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return 'REDIS_URL';
  }
}

async function redisBackend(io: KeysIo): Promise<KeysBackend> {
  let env: Pick<ApiEnv, 'REDIS_URL' | 'TETRALOOP_PREFIX' | 'TETRALOOP_KEYS_MAX_PER_TENANT'>;
  try {
    env = parseEnv(
      ApiEnv.pick({ REDIS_URL: true, TETRALOOP_PREFIX: true, TETRALOOP_KEYS_MAX_PER_TENANT: true }),
      io.env,
    );
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new UsageError(
      `keys: without TETRALOOP_ADMIN_TOKEN the keys are managed in Redis directly, which needs REDIS_URL ` +
        `(and the deployment's TETRALOOP_PREFIX); or set TETRALOOP_ADMIN_TOKEN and TETRALOOP_API_URL\n${err.message}`,
    );
  }
  const where = `Redis at ${safeUrl(env.REDIS_URL)} (prefix ${env.TETRALOOP_PREFIX})`;
  let redis: Awaited<ReturnType<typeof connectRedisOnce>>;
  try {
    redis = await connectRedisOnce(env.REDIS_URL, 'tetraloop-cli-keys');
  } catch (err) {
    throw new UnreachableError(`cannot reach ${where} (${(err as Error).message}); set REDIS_URL`);
  }
  const store = new ApiKeyStore(redis, {
    prefix: env.TETRALOOP_PREFIX,
    maxPerTenant: env.TETRALOOP_KEYS_MAX_PER_TENANT,
  });
  return {
    where,
    async create(input) {
      try {
        return await store.create(input);
      } catch (err) {
        if (err instanceof KeyLimitError) throw new RefusedError(`tenant ${input.tenant}: ${err.message}`);
        throw err;
      }
    },
    list: (tenant) => store.list(tenant),
    revoke: (keyId) => store.revoke(keyId),
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** Keys as an aligned text table, one line each. */
export function keyTable(keys: readonly ApiKeyRecord[]): string {
  const header = ['KEY ID', 'TENANT', 'SCOPES', 'NAME', 'CREATED', 'EXPIRES', 'CREATED BY'];
  const rows = keys.map((k) => [
    k.keyId,
    k.tenant,
    k.scopes.join(','),
    k.name ?? '-',
    k.createdAt.replace(/\.\d+Z$/, 'Z'),
    k.expiresAt ?? '-',
    // A key id, `root`, or `-` for a key made before makers were recorded.
    k.createdBy ?? '-',
  ]);
  return textTable(header, rows);
}
