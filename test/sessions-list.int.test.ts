/**
 * `GET /v1/sessions` with auth on: each tenant's sessions with their lanes, most recently written
 * first, paged by a cursor; the list kept beside every session write, bounded by the idle TTL, and
 * rid of sessions that expired as a listing meets them. Sessions are written through the session
 * store (what the sense pool does), the list read through the API.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scopedName } from '@tetraloop/core/domain';
import {
  SessionStore,
  sessionKeyList,
  sessionKeys,
  tenantSessionsKey,
  type SessionListing,
} from '@tetraloop/core/state';
import { startStack, type Stack } from './support/stack.js';

const ROOT = 'root-token-0123456789-0123456789-0123456789';
const IDLE_SECONDS = 3600;
let stack: Stack;
let redis: Redis;
let sessions: SessionStore;

beforeAll(async () => {
  stack = await startStack({
    pools: [],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_SESSION_IDLE_TTL_SECONDS: String(IDLE_SECONDS),
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
  sessions = new SessionStore(redis, stack.prefix, { idleTtlSeconds: IDLE_SECONDS });
});

afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

interface Page {
  sessions: SessionListing[];
  nextCursor: string | null;
}

async function list(tenant: string, query = ''): Promise<{ status: number; body: Page }> {
  const res = await fetch(`${stack.url}/v1/sessions${query ? `?${query}` : ''}`, {
    headers: { authorization: `Bearer ${ROOT}`, 'x-tetraloop-tenant': tenant },
  });
  return { status: res.status, body: (await res.json()) as Page };
}

const names = (page: Page): string[] => page.sessions.map((s) => s.sessionKey);
const lane = {
  message: { text: 'hello', receivedAt: new Date().toISOString() },
  collectCap: 5,
  drop: 'old' as const,
  envCap: 5,
  followupCap: 100,
};

describe('GET /v1/sessions', () => {
  it('lists the tenant’s sessions with their lanes, most recently written first', async () => {
    const acme = `acme-${randomUUID().slice(0, 6)}`;
    const beta = `beta-${randomUUID().slice(0, 6)}`;
    await sessions.admit(scopedName(acme, 'alice'), { ...lane, mode: 'followup', runId: 'r1' });
    await sessions.admit(scopedName(acme, 'alice'), { ...lane, mode: 'followup', runId: 'r2' });
    await sessions.appendTranscript(scopedName(acme, 'bob'), { type: 'message', role: 'user', text: 'hi' });
    await sessions.appendTranscript(scopedName(beta, 'alice'), { type: 'message', role: 'user', text: 'x' });
    const page = (await list(acme)).body;
    expect(names(page)).toEqual(['bob', 'alice']);
    expect(page.nextCursor).toBeNull();
    expect(page.sessions[1]).toMatchObject({
      sessionKey: 'alice',
      running: 'r1',
      queued: [{ kind: 'run', runId: 'r2' }],
      contextId: 1,
      mode: null,
      environmentVersion: 0,
      lastActiveAt: expect.any(String),
      createdAt: expect.any(String),
    });
    // A write moves a session to the front; the other tenant sees only its own.
    await sessions.addEnvironmentEvent(scopedName(acme, 'alice'), { type: 'ping' }, 10);
    expect(names((await list(acme)).body)).toEqual(['alice', 'bob']);
    expect(names((await list(beta)).body)).toEqual(['alice']);
    expect((await list(`none-${randomUUID().slice(0, 6)}`)).body).toEqual({ sessions: [], nextCursor: null });
  });

  it('pages with a cursor, neither skipping nor repeating a session', async () => {
    const tenant = `pages-${randomUUID().slice(0, 6)}`;
    const made = ['s1', 's2', 's3', 's4', 's5'];
    for (const name of made) {
      await sessions.appendTranscript(scopedName(tenant, name), {
        type: 'message',
        role: 'user',
        text: name,
      });
    }
    const all = names((await list(tenant, 'limit=10')).body);
    expect(new Set(all)).toEqual(new Set(made));
    const seen: string[] = [];
    let page = (await list(tenant, 'limit=2')).body;
    seen.push(...names(page));
    while (page.nextCursor) {
      page = (await list(tenant, `limit=2&cursor=${page.nextCursor}`)).body;
      seen.push(...names(page));
    }
    expect(seen).toEqual(all);
  });

  it('drops a session that expired when a listing meets it, and keeps the list within the idle TTL', async () => {
    const tenant = `gone-${randomUUID().slice(0, 6)}`;
    await sessions.appendTranscript(scopedName(tenant, 'kept'), { type: 'message', role: 'user', text: 'a' });
    await sessions.appendTranscript(scopedName(tenant, 'gone'), { type: 'message', role: 'user', text: 'b' });
    const key = tenantSessionsKey(stack.prefix, tenant);
    expect(await redis.pttl(key)).toBeGreaterThan((IDLE_SECONDS - 60) * 1000);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(IDLE_SECONDS * 1000);
    // What the idle TTL does when it runs out; the entry is a minute old.
    await redis.del(...sessionKeyList(sessionKeys(stack.prefix, scopedName(tenant, 'gone'))));
    await redis.zadd(key, Date.now() - 61_000, scopedName(tenant, 'gone'));
    // An entry written just before its session's first write is left out, not dropped.
    await redis.zadd(key, Date.now(), scopedName(tenant, 'coming'));
    expect(names((await list(tenant)).body)).toEqual(['kept']);
    expect(await redis.zscore(key, scopedName(tenant, 'gone'))).toBeNull();
    expect(await redis.zscore(key, scopedName(tenant, 'coming'))).not.toBeNull();
    // A session idle for longer than the TTL is trimmed at the next write of any of the tenant's.
    await redis.zadd(key, Date.now() - IDLE_SECONDS * 1000 - 1, scopedName(tenant, 'old'));
    await sessions.appendTranscript(scopedName(tenant, 'kept'), { type: 'message', role: 'user', text: 'c' });
    expect(await redis.zscore(key, scopedName(tenant, 'old'))).toBeNull();
  });

  it('refuses a bad limit or cursor', async () => {
    expect((await list('acme', 'limit=0')).status).toBe(400);
    expect((await list('acme', 'cursor=nope')).status).toBe(400);
    expect((await list('acme', 'other=1')).status).toBe(400);
  });
});
