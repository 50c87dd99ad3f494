/**
 * `tetraloop keys …` and the client commands against a stack with auth required, as real child
 * processes: keys made through the API with the root token and in Redis directly (no token), listed
 * and revoked either way; `tetraloop run` with TETRALOOP_API_KEY; and the exit codes for a refused
 * credential (3), an unreachable API or Redis (4), an unknown key (1) and bad usage (2).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysCommand } from '@tetraloop/cli';
import { freePort } from '@tetraloop/core/runtime';
import { runTetraloop } from '../support/processes.js';
import { startStack, type Stack } from '../support/stack.js';

const ROOT_TOKEN = 'root-token-for-the-keys-command-test-0123456789';
const KEY = /^tl_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$/;

let stack: Stack;
let dir: string;
let graphFile: string;

/** The command's environment: through the API with the root token, or in Redis directly. */
const viaApi = (): Record<string, string> => ({
  TETRALOOP_API_URL: stack.url,
  TETRALOOP_ADMIN_TOKEN: ROOT_TOKEN,
  LOG_LEVEL: 'silent',
});
const viaRedis = (): Record<string, string> => ({
  REDIS_URL: stack.env.REDIS_URL!,
  TETRALOOP_PREFIX: stack.prefix,
  LOG_LEVEL: 'silent',
});

/** What a key may do at the API: the status of a request it makes. */
async function statusWith(
  key: string,
  path = '/v1/runs/00000000-0000-4000-8000-000000000000',
): Promise<number> {
  const res = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  await res.body?.cancel();
  return res.status;
}

beforeAll(async () => {
  stack = await startStack({
    pools: ['plan', 'tool'],
    env: { TETRALOOP_AUTH: 'required', TETRALOOP_ADMIN_TOKEN: ROOT_TOKEN },
  });
  dir = await mkdtemp(join(tmpdir(), 'tetraloop-keys-'));
  graphFile = join(dir, 'graph.json');
  await writeFile(
    graphFile,
    JSON.stringify({
      nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: { ok: true } } }],
      edges: [],
    }),
  );
});
afterAll(async () => {
  await stack?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

// Each case spawns the command (tsx compiles it at start-up) a few times on two shared cores.
describe('tetraloop keys', { timeout: 90_000 }, () => {
  let apiKey = '';
  let apiKeyId = '';
  let redisKey = '';
  let redisKeyId = '';

  it('makes a key through the API with the root token, printing it once', async () => {
    const made = await runTetraloop(
      ['keys', 'create', '--tenant', 'acme', '--scopes', 'runs:write,runs:read', '--name', 'ci'],
      viaApi(),
    );
    expect(made.code, made.stderr).toBe(0);
    apiKey = made.stdout.trim();
    expect(apiKey).toMatch(KEY);
    apiKeyId = KEY.exec(apiKey)![1]!;
    expect(made.stderr).toContain(`key ${apiKeyId} made in the API at ${stack.url}: tenant acme`);
    expect(made.stderr).toContain('shown only once');
    // The key works, in its tenant: an unknown run is a 404, not a 401.
    expect(await statusWith(apiKey)).toBe(404);
    // And only within its scopes.
    expect(await statusWith(apiKey, '/v1/keys')).toBe(403);
  });

  it('makes a key in Redis directly without a root token, as JSON', async () => {
    const made = await runTetraloop(
      ['keys', 'create', '--tenant', 'acme', '--scopes', 'admin,runs:read', '--json'],
      viaRedis(),
    );
    expect(made.code, made.stderr).toBe(0);
    const answer = JSON.parse(made.stdout) as {
      keyId: string;
      key: string;
      tenant: string;
      scopes: string[];
    };
    expect(answer).toMatchObject({ tenant: 'acme', scopes: ['admin', 'runs:read'] });
    expect(answer.key).toMatch(KEY);
    expect(made.stderr).toContain('shown only once');
    redisKey = answer.key;
    redisKeyId = answer.keyId;
    // The API, which caches nothing, accepts it at once: an admin key lists its tenant's keys.
    const listed = await fetch(`${stack.url}/v1/keys`, { headers: { authorization: `Bearer ${redisKey}` } });
    expect(listed.status).toBe(200);
    const { keys } = (await listed.json()) as { keys: { keyId: string }[] };
    expect(keys.map((k) => k.keyId).sort()).toEqual([apiKeyId, redisKeyId].sort());
  });

  it('lists keys through the API and in Redis, as a table or JSON, never with their secrets', async () => {
    const [table, json, redisJson, other] = await Promise.all([
      runTetraloop(['keys', 'list', '--tenant', 'acme'], viaApi()),
      runTetraloop(['keys', 'list', '--json'], viaApi()),
      runTetraloop(['keys', 'list', '--tenant', 'acme', '--json'], viaRedis()),
      runTetraloop(['keys', 'list', '--tenant', 'nobody'], viaRedis()),
    ]);
    expect(table.code, table.stderr).toBe(0);
    const [header, ...rows] = table.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^KEY ID +TENANT +SCOPES +NAME +CREATED +EXPIRES +CREATED BY$/);
    expect(rows.find((r) => r.startsWith(apiKeyId))).toMatch(
      / +acme +runs:write,runs:read +ci +\S+Z +- +root$/,
    );
    expect(table.stderr).toBe('2 keys of tenant acme\n');
    for (const listed of [json, redisJson]) {
      expect(listed.code, listed.stderr).toBe(0);
      const ids = (JSON.parse(listed.stdout) as { keys: { keyId: string }[] }).keys.map((k) => k.keyId);
      expect(ids).toEqual(expect.arrayContaining([apiKeyId, redisKeyId]));
    }
    for (const out of [table.stdout, json.stdout, redisJson.stdout]) {
      expect(out).not.toContain(apiKey.slice(20));
      expect(out).not.toContain(redisKey.slice(20));
    }
    expect(other).toMatchObject({ code: 0, stdout: '', stderr: 'no keys of tenant nobody\n' });
  });

  it('runs a graph with TETRALOOP_API_KEY, and says what to set without it', async () => {
    const env = { TETRALOOP_API_URL: stack.url, LOG_LEVEL: 'silent' };
    const ran = await runTetraloop(['run', graphFile], { ...env, TETRALOOP_API_KEY: apiKey });
    expect(ran.code, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ status: 'succeeded', tenant: 'acme' });

    const [anonymous, readOnly] = await Promise.all([
      runTetraloop(['run', graphFile], env),
      runTetraloop(['lessons', 'list', 'main'], { ...env, TETRALOOP_API_KEY: 'tl_0000000000000000_nope' }),
    ]);
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toContain('the API answered 401 unauthorized');
    expect(anonymous.stderr).toContain('set TETRALOOP_API_KEY');
    expect(readOnly.code).toBe(1);
    expect(readOnly.stderr).toContain('set TETRALOOP_API_KEY');
  });

  it('revokes keys through the API and in Redis: the API refuses them at once', async () => {
    const [byApi, byRedis] = await Promise.all([
      runTetraloop(['keys', 'revoke', apiKeyId], viaApi()),
      // --redis wins over a root token in the environment; a whole key names its id.
      runTetraloop(['keys', 'revoke', redisKey, '--redis'], {
        ...viaRedis(),
        TETRALOOP_ADMIN_TOKEN: 'unused',
      }),
    ]);
    expect(byApi.code, byApi.stderr).toBe(0);
    expect(byApi.stderr).toContain(`key ${apiKeyId} revoked`);
    expect(byRedis.code, byRedis.stderr).toBe(0);
    expect(await statusWith(apiKey)).toBe(401);
    expect(await statusWith(redisKey)).toBe(401);
    const again = await runTetraloop(['keys', 'revoke', apiKeyId], viaApi());
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no key ${apiKeyId}`);
  });

  it('exits 3 when the API refuses the credential, 4 when the API or Redis is unreachable', async () => {
    const limited = await runTetraloop(['keys', 'create', '--scopes', 'runs:read'], viaRedis());
    const limitedKey = limited.stdout.trim();
    const closed = await freePort();
    const [wrongToken, notAdmin, noApi, noRedis] = await Promise.all([
      runTetraloop(['keys', 'list'], { ...viaApi(), TETRALOOP_ADMIN_TOKEN: 'not-the-root-token' }),
      runTetraloop(['keys', 'list'], { ...viaApi(), TETRALOOP_ADMIN_TOKEN: limitedKey }),
      runTetraloop(['keys', 'list'], { ...viaApi(), TETRALOOP_API_URL: `http://127.0.0.1:${closed}` }),
      runTetraloop(['keys', 'list'], { ...viaRedis(), REDIS_URL: `redis://127.0.0.1:${closed}` }),
    ]);
    expect(wrongToken.code).toBe(3);
    expect(wrongToken.stderr).toContain('the API answered 401 unauthorized');
    expect(wrongToken.stderr).toContain('set TETRALOOP_ADMIN_TOKEN');
    expect(notAdmin.code).toBe(3);
    expect(notAdmin.stderr).toContain('the API answered 403 forbidden');
    expect(noApi.code).toBe(4);
    expect(noApi.stderr).toMatch(/cannot reach the API at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    expect(noRedis.code).toBe(4);
    expect(noRedis.stderr).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+ .*ECONNREFUSED/);
  });

  it('exits 2 on bad usage, and is in the usage', async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [[], viaRedis(), /^usage: tetraloop keys <command>/],
      [['frobnicate'], viaRedis(), /unknown keys command 'frobnicate'/],
      [['create'], viaRedis(), /keys create needs --scopes/],
      [['create', '--scopes', 'runs:read,root'], viaRedis(), /unknown scope root/],
      [['create', '--scopes', 'runs:read', '--tenant', 'Acme!'], viaRedis(), /--tenant: a tenant is/],
      [
        ['create', '--scopes', 'runs:read', '--expires-at', '2001-01-01T00:00:00Z'],
        viaRedis(),
        /--expires-at: must be in the future/,
      ],
      [['revoke'], viaRedis(), /keys revoke needs a key id/],
      [['revoke', 'nope'], viaRedis(), /'nope' is not a key id/],
      [['list', '--bogus'], viaRedis(), /keys list: Unknown option '--bogus'/],
      [['list', '--tenant', 'A B'], viaRedis(), /'A B' is not a tenant/],
      [['list'], { LOG_LEVEL: 'silent' }, /needs REDIS_URL/],
    ];
    for (const [args, env, message] of cases) {
      let stdout = '';
      let stderr = '';
      const code = await keysCommand(args, {
        env,
        stdout: (text) => (stdout += text),
        stderr: (text) => (stderr += text),
      });
      expect(code, args.join(' ')).toBe(2);
      expect(stdout, args.join(' ')).toBe('');
      expect(stderr, args.join(' ')).toMatch(message);
    }
    const bare = await runTetraloop([], {});
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('keys create --scopes <scope,…>');
    expect(bare.stderr).toContain('TETRALOOP_API_KEY');
  });
});
