import { describe, expect, it } from 'vitest';
import { Ceilings, type CeilingSettings } from './ceilings.js';

const settings = (over: Partial<CeilingSettings> = {}): CeilingSettings => ({
  agents: {},
  agentTools: {},
  tenants: {},
  modelsAllow: [],
  defaultModel: 'small',
  budget: {},
  ...over,
});
const none = new Set<string>();

describe('declared agents', () => {
  it('accepts any agent while none is declared', () => {
    expect(new Ceilings(settings()).agentRefusal('default', 'anyone', none)).toBeUndefined();
  });

  it('refuses an agent neither TETRALOOP_AGENTS nor a workspace folder declares', () => {
    const c = new Ceilings(settings({ agents: { analyst: {} } }));
    expect(c.agentRefusal('default', 'analyst', none)).toBeUndefined();
    expect(c.agentRefusal('default', 'main', none)).toMatch(/unknown agent "main"/);
    expect(c.agentRefusal('default', 'main', new Set(['main']))).toBeUndefined();
  });

  it('counts a workspace folder alone as declaring agents', () => {
    const c = new Ceilings(settings());
    expect(c.agentRefusal('default', 'other', new Set(['main']))).toMatch(/unknown agent/);
  });

  it('does not take TETRALOOP_AGENT_TOOLS as declaring agents', () => {
    const c = new Ceilings(settings({ agentTools: { analyst: ['json'] } }));
    expect(c.agentRefusal('default', 'other', none)).toBeUndefined();
  });

  it('holds a tenant to its agents, even with nothing declared', () => {
    const c = new Ceilings(settings({ tenants: { acme: { agents: ['main'] } } }));
    expect(c.agentRefusal('acme', 'main', none)).toBeUndefined();
    expect(c.agentRefusal('acme', 'other', none)).toMatch(/not allowed for tenant "acme"/);
    expect(c.agentRefusal('default', 'other', none)).toBeUndefined();
  });

  it("does not read a tenant's entry from the object prototype", () => {
    expect(new Ceilings(settings()).agentRefusal('constructor', 'main', none)).toBeUndefined();
  });
});

describe('tools', () => {
  const all = ['http', 'json', 'wait'];
  it('allows every tool to an agent no list names', () => {
    expect([...new Ceilings(settings()).toolsOf('main', all)]).toEqual(all);
  });

  it('intersects the lists of TETRALOOP_AGENTS and TETRALOOP_AGENT_TOOLS', () => {
    const c = new Ceilings(
      settings({ agents: { a: { tools: ['http', 'json'] } }, agentTools: { a: ['json', 'wait'] } }),
    );
    expect([...c.toolsOf('a', all)]).toEqual(['json']);
  });

  it('lets an entry ending in .* allow every tool its prefix starts', () => {
    const c = new Ceilings(settings({ agents: { a: { tools: ['json', 'mcp.everything.*'] } } }));
    const listed = [
      ...all,
      'mcp.everything.echo',
      'mcp.everything.get-sum',
      'mcp.other.echo',
      'mcp.everythingelse.x',
    ];
    expect([...c.toolsOf('a', listed)]).toEqual(['json', 'mcp.everything.echo', 'mcp.everything.get-sum']);
  });

  it('holds tools a registry has without listing them, when the lists allow them', () => {
    // A registry that has every `mcp.late.*` name but lists none (its server's tools are not known yet).
    const tools = { keys: () => all, has: (n: string) => all.includes(n) || n.startsWith('mcp.late.') };
    const open = new Ceilings(settings()).toolSetOf('main', tools);
    expect([...open]).toEqual(all);
    expect(open.has('mcp.late.x')).toBe(true);
    expect(open.has('mcp.other.x')).toBe(false);
    const c = new Ceilings(settings({ agentTools: { a: ['json', 'mcp.late.x'], b: ['mcp.late.*'] } }));
    expect([...c.toolSetOf('a', tools)]).toEqual(['json']);
    expect(c.toolSetOf('a', tools).has('mcp.late.x')).toBe(true);
    expect(c.toolSetOf('a', tools).has('mcp.late.y')).toBe(false);
    expect(c.toolSetOf('b', tools).has('mcp.late.y')).toBe(true);
  });
});

describe('models', () => {
  it('allows any model without lists', () => {
    expect(new Ceilings(settings()).models('default', 'main').refusal('big')).toBeUndefined();
  });

  it('refuses a model outside TETRALOOP_MODELS_ALLOW, the default model included', () => {
    const p = new Ceilings(settings({ modelsAllow: ['big'] })).models('default', 'main');
    expect(p.refusal('big')).toBeUndefined();
    expect(p.refusal('huge')).toMatch(/model "huge" is not allowed by TETRALOOP_MODELS_ALLOW/);
    expect(p.refusal(undefined)).toMatch(/the default model "small"/);
  });

  it("intersects the deployment's list with the tenant's and the agent's", () => {
    const c = new Ceilings(
      settings({
        modelsAllow: ['small', 'big', 'huge'],
        tenants: { acme: { models: ['small', 'big'] } },
        agents: { main: { models: ['small'] } },
      }),
    );
    expect(c.models('acme', 'main').refusal('small')).toBeUndefined();
    expect(c.models('acme', 'other').refusal('big')).toBeUndefined();
    expect(c.models('acme', 'other').refusal('huge')).toMatch(/tenant "acme"/);
    expect(c.models('acme', 'main').refusal('big')).toMatch(/agent "main"/);
    expect(c.models('default', 'other').refusal('huge')).toBeUndefined();
  });
});

describe('budget, deadline, caps and rates', () => {
  it('clamps each budget field and the deadline to its ceiling, leaving the others', () => {
    const c = new Ceilings(settings({ budget: { tokens: 100, toolCalls: 5, timeoutSeconds: 60 } }));
    expect(c.clampBudget({ toolCalls: 10, toolTimeMs: 999_999, tokens: 50 })).toEqual({
      toolCalls: 5,
      toolTimeMs: 999_999,
      tokens: 50,
    });
    expect(c.clampTimeout(600)).toBe(60);
    expect(c.clampTimeout(30)).toBe(30);
  });

  it('clamps the money budget, and gives a run without one the ceiling', () => {
    const base = { toolCalls: 1, toolTimeMs: 1, tokens: 1 };
    const capped = new Ceilings(settings({ budget: { costUsd: 2 } }));
    expect(capped.clampBudget({ ...base, costUsd: 5 }).costUsd).toBe(2);
    expect(capped.clampBudget({ ...base, costUsd: 0.5 }).costUsd).toBe(0.5);
    expect(capped.clampBudget(base).costUsd).toBe(2);
    expect(capped.maxCostUsd()).toBe(2);
    const open = new Ceilings(settings());
    expect(open.clampBudget(base)).toEqual(base);
    expect(open.maxCostUsd()).toBeUndefined();
  });

  it("reads a tenant's daily money cap", () => {
    const c = new Ceilings(settings({ tenants: { acme: { dailyCostUsd: 25 } } }));
    expect(c.dailyCostUsd('acme')).toBe(25);
    expect(c.dailyCostUsd('other')).toBeUndefined();
  });

  it("takes a tenant's own cap and rate over the deployment's", () => {
    const c = new Ceilings(
      settings({
        maxRunning: 4,
        ratePerKey: 10,
        ratePerTenant: 100,
        tenants: { acme: { maxConcurrentRuns: 1, requestsPerMinute: 5 } },
      }),
    );
    expect(c.maxRunning('acme')).toBe(1);
    expect(c.maxRunning('other')).toBe(4);
    expect(c.rates('acme', 'k1')).toEqual({ perKey: 10, perTenant: 5 });
    expect(c.rates('other', null)).toEqual({ perKey: 0, perTenant: 100 });
    expect(new Ceilings(settings()).maxRunning('acme')).toBeUndefined();
  });
});

describe('models a run asks for by name', () => {
  it('takes only configured models when no list applies', () => {
    const c = new Ceilings(settings({ plannerModel: 'big' }));
    expect(c.runModelRefusal('default', 'main', 'small')).toBeUndefined();
    expect(c.runModelRefusal('default', 'main', 'big')).toBeUndefined();
    expect(c.runModelRefusal('default', 'main', 'other')).toMatch(
      /^unknown model "other": configured are big, small/,
    );
  });

  it('takes what every list that applies allows, and nothing else', () => {
    const c = new Ceilings(
      settings({ modelsAllow: ['small', 'reasoner'], agents: { ops: { models: ['reasoner'] } } }),
    );
    expect(c.runModelRefusal('default', 'main', 'reasoner')).toBeUndefined();
    expect(c.runModelRefusal('default', 'ops', 'reasoner')).toBeUndefined();
    expect(c.runModelRefusal('default', 'ops', 'small')).toMatch(/not allowed by agent "ops"/);
    expect(c.runModelRefusal('default', 'main', 'other')).toMatch(/not allowed by TETRALOOP_MODELS_ALLOW/);
  });
});
