import { describe, expect, it } from 'vitest';
import { DEFAULT_TENANT, scopedName } from '../domain/tenant.js';
import { keySlot } from './key-slot.js';
import * as keys from './keys.js';

const P = 'tl';

/** Every key of `tenant` a store names after it: one or more of each per-tenant builder's keys. */
const PER_TENANT = {
  tenantRunsKey: (t: string) => [keys.tenantRunsKey(P, t)],
  runSearchKeys: (t: string) => {
    const k = keys.runSearchKeys(P, t);
    return [k.all, k.status('running'), k.agent('main'), k.session(scopedName(t, 'alice')), k.tag('x')];
  },
  tenantSessionsKey: (t: string) => [keys.tenantSessionsKey(P, t)],
  storeItemsKey: (t: string) => [keys.storeItemsKey(P, t)],
  sessionKeys: (t: string) => {
    const k = keys.sessionKeys(P, scopedName(t, 'alice'));
    return [...keys.sessionKeyList(k), k.seen];
  },
  memoryKeys: (t: string) => keys.memoryKeyList(keys.memoryKeys(P, scopedName(t, 'main'))),
  probeKey: (t: string) => [keys.probeKey(P, scopedName(t, 'main'), 'lesson-1')],
  blobKey: (t: string) => [keys.blobKey(P, t, 'ab'.repeat(32))],
  planCacheKey: (t: string) => [keys.planCacheKey(P, scopedName(t, 'main'), 'h1')],
  secretKeys: (t: string) => keys.secretKeyList(keys.secretKeys(P, t)),
  rateBucketKey: (t: string) => [keys.rateBucketKey(P, t, null), keys.rateBucketKey(P, t, 'k1')],
  tenantSlotKeys: (t: string) => {
    const k = keys.tenantSlotKeys(P, t);
    return [k.running, k.waiting];
  },
  costDayKey: (t: string) => [keys.costDayKey(P, t, '2026-01-31')],
  webhookKeys: (t: string) => {
    const k = keys.webhookKeys(P, t);
    return [k.subscriptions, k.signing];
  },
  webhookDeliveriesKey: (t: string) => [
    keys.webhookDeliveriesKey(P, t, { subscription: 'w1' }),
    keys.webhookDeliveriesKey(P, t, { runId: 'r1' }),
  ],
  scheduleKeys: (t: string) => {
    const k = keys.scheduleKeys(P, t);
    return [k.schedules, k.state('sch_1')];
  },
  triggersKey: (t: string) => [keys.triggersKey(P, t)],
  eventKeys: (t: string) => {
    const k = keys.eventKeys(P, t);
    return [k.seq, k.event('e1'), k.batch('trg_1', 'h'), k.taken('trg_1', 'h', 3), k.debounce('trg_1', 'h')];
  },
} satisfies Partial<Record<keyof typeof keys, (tenant: string) => string[]>>;

/** The other exports, and why deleting a tenant does not find their keys by pattern. */
const NOT_BY_PATTERN: Partial<Record<keyof typeof keys, string>> = {
  runKeys: 'a run’s keys: deleted through the tenant’s run index',
  runKeyList: 'a list of runKeys',
  runNodeSlotKeys:
    'a run’s node slot sets: deleted with its keys (RunLifecycle.purge), through the tenant’s run index',
  sessionKeyList: 'a list of sessionKeys',
  memoryKeyList: 'a list of memoryKeys',
  secretKeyList: 'a list of secretKeys',
  tenantApiKeysKey: 'deleted with the tenant’s API keys (ApiKeyStore.revokeTenant)',
  apiKeyKey: 'named by key id: deleted through tenantApiKeysKey',
  apiKeyChildrenKey: 'named by key id: deleted through tenantApiKeysKey',
  apiKeyTenantsKey: 'the deployment’s: the tenant is removed from it',
  busySessionsKey: 'the deployment’s: the tenant’s members are removed from it',
  memoryAgentsKey: 'the deployment’s: the tenant’s members are removed from it',
  queuedRunsKey: 'the deployment’s',
  runDeadlinesKey: 'the deployment’s: a purged run’s entry leaves it when the sweep finds the run gone',
  acceptBarrierKey: 'the deployment’s',
  channels: 'channels, not keys',
  mcpCatalogKey: 'the deployment’s',
  mcpCatalogChannel: 'a channel',
  toolCatalogKeys: 'the deployment’s custom tool catalog (bounded by its TTL and heartbeats)',
  sourcesKey: 'the deployment’s sources',
  fileSourceKey: 'the deployment’s sources',
  sourceLeaseKey: 'the deployment’s sources',
  dedupeKey: 'expires with its window',
  webhookSignatureKey: 'expires with its tolerance',
  burstKey: 'expires with its burst window',
  adminSessionKey: 'the operator’s',
  callKeyKey: 'the deployment’s',
  flowKeys: 'the deployment’s flow control',
  flowLimitsKey: 'the deployment’s',
  tenantKeyPatterns: 'the patterns themselves',
  keyHash: 'a hash, not a key',
};

/** Redis `MATCH` for the patterns the registry writes: `*` and `?`, everything else literal. */
function globOf(pattern: string): RegExp {
  if (/[[\\]/.test(pattern)) throw new Error(`${pattern}: a class or an escape this test does not read`);
  const source = pattern
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`, 's');
}
const matches = (pattern: string, key: string): boolean => globOf(pattern).test(key);

const keysOf = (tenant: string): string[] => Object.values(PER_TENANT).flatMap((make) => make(tenant));

describe('the key registry', () => {
  it('classes every export: per tenant (with a pattern) or why not', () => {
    const exported = Object.entries(keys)
      .filter(([, value]) => typeof value === 'function')
      .map(([name]) => name);
    expect(exported.filter((name) => !(name in PER_TENANT) && !(name in NOT_BY_PATTERN))).toEqual([]);
  });

  it('matches every key of a tenant by one of its patterns and by none of another tenant’s', () => {
    const tenants = ['acme', 'acme2', 'acm', 'a-cme'];
    const wrong: string[] = [];
    for (const tenant of tenants) {
      for (const key of keysOf(tenant)) {
        for (const other of tenants) {
          const by = keys.tenantKeyPatterns(P, other).filter((p) => matches(p, key));
          if (by.length !== (other === tenant ? 1 : 0)) wrong.push(`${key} by ${other}’s ${by.join(' ')}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('matches none of the default tenant’s keys, and refuses patterns for it', () => {
    const defaults = keysOf(DEFAULT_TENANT);
    for (const pattern of keys.tenantKeyPatterns(P, 'acme')) {
      expect(defaults.filter((key) => matches(pattern, key))).toEqual([]);
    }
    expect(() => keys.tenantKeyPatterns(P, DEFAULT_TENANT)).toThrow();
  });

  it('keeps the patterns deleting a tenant has always scanned for', () => {
    expect(keys.tenantKeyPatterns(P, 'acme')).toEqual([
      'tl:tenant:acme:*',
      'tl:session:{s:acme~*',
      'tl:memory:{m:acme~*',
      'tl:plancache:{a:acme~*',
      'tl:blob:acme~*',
      'tl:secrets:{t:acme}*',
      'tl:webhooks:{t:acme}*',
      'tl:rate:{t:acme}*',
      'tl:slots:{t:acme}*',
      'tl:cost:{t:acme}*',
      'tl:triggers:{t:acme}*',
      'tl:events:{t:acme}*',
    ]);
  });

  it('puts the keys one script takes in one cluster slot', () => {
    const oneSlot = (list: string[]) => expect(new Set(list.map(keySlot)).size).toBe(1);
    const flow = keys.flowKeys(P);
    const counter = flow.counter('hosts=api.test');
    oneSlot([
      flow.base,
      flow.waiting,
      flow.granted,
      flow.counters,
      flow.member('job-1'),
      counter.state,
      counter.inflight,
      counter.log,
    ]);
    oneSlot(keys.runKeyList(keys.runKeys(P, 'run-1')));
    oneSlot(PER_TENANT.sessionKeys('acme'));
    oneSlot([...PER_TENANT.memoryKeys('acme'), ...PER_TENANT.probeKey('acme')]);
    oneSlot(PER_TENANT.secretKeys('acme'));
    oneSlot([...PER_TENANT.rateBucketKey('acme'), ...PER_TENANT.tenantSlotKeys('acme')]);
    oneSlot([...PER_TENANT.webhookKeys('acme'), ...PER_TENANT.webhookDeliveriesKey('acme')]);
    oneSlot([...PER_TENANT.triggersKey('acme'), ...PER_TENANT.eventKeys('acme')]);
  });
});
