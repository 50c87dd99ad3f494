/**
 * Ceilings: what a deployment lets callers ask for, whatever they ask. Declared agents and their
 * tools and models, tenants restricted to some agents and models, the largest budget a run may
 * have, the models anyone may name, request rates and running runs per tenant. Pure: the rules
 * only; the API, the run service, the planner and the plan pool apply them, and the Redis
 * adapters (`state/rate-limit-store.ts`, `state/tenant-slots.ts`) count.
 */
import { z } from 'zod';
import { MAX_BUDGET_COST_USD, type Budget } from '../domain/node-snapshot.js';
import { SecretName } from '../secrets/secret-ref.js';

/** An agent id as the run request spells it. */
export const AgentId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match [A-Za-z0-9_-]{1,64}');

/**
 * One declared agent: the tools and models it may use (each: any when omitted), and the tenant
 * secrets its planned nodes may reference in every run (none when omitted; a run grants more).
 */
export const AgentCeiling = z.strictObject({
  tools: z.array(z.string().min(1).max(128)).optional(),
  models: z.array(z.string().min(1).max(200)).optional(),
  secrets: z.array(SecretName).max(100).optional(),
});
export type AgentCeiling = z.infer<typeof AgentCeiling>;

/** One tenant's restrictions (each: none when omitted). */
export const TenantCeiling = z.strictObject({
  agents: z.array(AgentId).optional(),
  models: z.array(z.string().min(1).max(200)).optional(),
  maxConcurrentRuns: z.number().int().positive().optional(),
  requestsPerMinute: z.number().int().positive().optional(),
  /** USD the tenant's model calls may cost per day (UTC); calls past it fail `budget_exhausted`. */
  dailyCostUsd: z.number().positive().max(MAX_BUDGET_COST_USD).optional(),
});
export type TenantCeiling = z.infer<typeof TenantCeiling>;

/** The largest budget and deadline a run may have; a request asking more is clamped to them. */
export interface BudgetCeiling {
  readonly toolCalls?: number;
  readonly toolTimeMs?: number;
  readonly tokens?: number;
  /** USD; a run without a money budget gets this one. */
  readonly costUsd?: number;
  readonly timeoutSeconds?: number;
}

/** The budget fields every run has; `costUsd` only when asked for, defaulted or capped. */
export type RunBudget = Required<Pick<Budget, 'toolCalls' | 'toolTimeMs' | 'tokens'>> &
  Pick<Budget, 'costUsd'>;

/** Everything the ceilings are compiled from: the parsed configuration. */
export interface CeilingSettings {
  /** `TETRALOOP_AGENTS`. */
  readonly agents: Readonly<Record<string, AgentCeiling>>;
  /** `TETRALOOP_AGENT_TOOLS`: tool lists only; an agent listed here is not declared by it. */
  readonly agentTools: Readonly<Record<string, readonly string[]>>;
  /** `TETRALOOP_TENANTS`. */
  readonly tenants: Readonly<Record<string, TenantCeiling>>;
  /** `TETRALOOP_MODELS_ALLOW`; empty: any model. */
  readonly modelsAllow: readonly string[];
  /** The model of llm nodes and agent loops that name none (`TETRALOOP_MODEL`). */
  readonly defaultModel: string;
  /** The planner's model (`TETRALOOP_PLANNER_MODEL`), a model the operator named. */
  readonly plannerModel?: string;
  readonly budget: BudgetCeiling;
  /** `TETRALOOP_TENANT_MAX_RUNNING`: running runs per tenant without a `maxConcurrentRuns`. */
  readonly maxRunning?: number;
  /** Requests per minute per API key, and per tenant without a `requestsPerMinute`. */
  readonly ratePerKey?: number;
  readonly ratePerTenant?: number;
}

/** The models a run may call. */
export interface ModelPolicy {
  readonly defaultModel: string;
  /** Why `model` (the default model when undefined) may not be called, or undefined when it may. */
  refusal(model: string | undefined): string | undefined;
}

/** The rates one request is counted against: 0 turns a bucket off. */
export interface RequestRates {
  readonly perKey: number;
  readonly perTenant: number;
}

/** Whether a tool-list entry allows `tool`: the same name, or a prefix ending in `.*`. */
const allows = (entry: string, tool: string): boolean =>
  entry === tool || (entry.endsWith('.*') && tool.startsWith(entry.slice(0, -1)));

/** What `toolSetOf` reads of a tool registry. */
export interface KnownTools {
  keys(): Iterable<string>;
  has(name: string): boolean;
}

/** The listed tools, and beyond them whatever `allowed` accepts. */
class AllowedTools implements ReadonlySet<string> {
  constructor(
    private readonly listed: ReadonlySet<string>,
    private readonly allowed: (name: string) => boolean,
  ) {}

  has(name: string): boolean {
    return this.listed.has(name) || this.allowed(name);
  }

  get size(): number {
    return this.listed.size;
  }

  keys(): SetIterator<string> {
    return this.listed.keys();
  }

  values(): SetIterator<string> {
    return this.listed.values();
  }

  entries(): SetIterator<[string, string]> {
    return this.listed.entries();
  }

  [Symbol.iterator](): SetIterator<string> {
    return this.listed.values();
  }

  forEach(callback: (value: string, key: string, set: ReadonlySet<string>) => void): void {
    for (const name of this.listed) callback(name, name, this);
  }
}

export class Ceilings {
  private readonly modelsAllow: ReadonlySet<string> | undefined;

  constructor(private readonly settings: CeilingSettings) {
    this.modelsAllow = settings.modelsAllow.length > 0 ? new Set(settings.modelsAllow) : undefined;
  }

  /**
   * Why `tenant` may not run `agentId`, or undefined when it may. `folders` are the agents with a
   * folder in the workspace. When no agent is declared at all (TETRALOOP_AGENTS empty and no
   * workspace folder), any agent id is accepted, as before agents were declared; a tenant's own
   * `agents` list applies either way.
   */
  agentRefusal(tenant: string, agentId: string, folders: ReadonlySet<string>): string | undefined {
    const declared = Object.keys(this.settings.agents).length > 0 || folders.size > 0;
    if (declared && !Object.hasOwn(this.settings.agents, agentId) && !folders.has(agentId)) {
      return `unknown agent "${agentId}": declare it in TETRALOOP_AGENTS or give it a workspace folder`;
    }
    const allowed = this.tenant(tenant)?.agents;
    if (allowed && !allowed.includes(agentId)) {
      return `agent "${agentId}" is not allowed for tenant "${tenant}"`;
    }
    return undefined;
  }

  /**
   * The agents `tenant` may run by name: the declared ones and those with a workspace folder
   * (`fallback` too when none is declared, as any id is accepted then), less those its own
   * `agents` list leaves out. Sorted.
   */
  agentsFor(tenant: string, folders: ReadonlySet<string>, fallback: string): string[] {
    const known = new Set([...Object.keys(this.settings.agents), ...folders]);
    if (known.size === 0) known.add(fallback);
    const allowed = this.tenant(tenant)?.agents;
    return [...known].filter((id) => !allowed || allowed.includes(id)).sort();
  }

  /**
   * The tools `agentId` may use: those of `all` that each list naming the agent allows. A list
   * entry ending in `.*` allows every tool whose name starts with what is before the `*`:
   * `mcp.github.*` allows each tool of MCP server `github`, whatever it lists.
   */
  toolsOf(agentId: string, all: Iterable<string>): ReadonlySet<string> {
    const lists = this.toolLists(agentId);
    return new Set([...all].filter((tool) => lists.every((l) => l.some((entry) => allows(entry, tool)))));
  }

  /**
   * The tools `agentId` may use among those `tools` has: a set that lists the tools `tools` lists,
   * and also holds each name `tools` has without listing it (a tool of an MCP server whose tools
   * are not known yet) when the agent's lists allow it. Read when asked: tools come and go.
   */
  toolSetOf(agentId: string, tools: KnownTools): ReadonlySet<string> {
    return new AllowedTools(this.toolsOf(agentId, tools.keys()), (name) => {
      const lists = this.toolLists(agentId);
      return tools.has(name) && lists.every((l) => l.some((entry) => allows(entry, name)));
    });
  }

  private toolLists(agentId: string): (readonly string[])[] {
    return [this.agent(agentId)?.tools, this.settings.agentTools[agentId]].filter(
      (l): l is readonly string[] => l !== undefined,
    );
  }

  /** The secrets `agentId` grants the nodes a model plans for it in every run (its declared `secrets`). */
  agentSecrets(agentId: string): readonly string[] {
    return this.agent(agentId)?.secrets ?? [];
  }

  /** The models a run of `agentId` in `tenant` may call: the deployment's, the tenant's and the agent's lists together. */
  models(tenant: string, agentId: string): ModelPolicy {
    const { defaultModel } = this.settings;
    const lists: [string, ReadonlySet<string>][] = [];
    if (this.modelsAllow) lists.push(['TETRALOOP_MODELS_ALLOW', this.modelsAllow]);
    const ofTenant = this.tenant(tenant)?.models;
    if (ofTenant) lists.push([`tenant "${tenant}"`, new Set(ofTenant)]);
    const ofAgent = this.agent(agentId)?.models;
    if (ofAgent) lists.push([`agent "${agentId}"`, new Set(ofAgent)]);
    return {
      defaultModel,
      refusal: (model) => {
        const name = model ?? defaultModel;
        const refused = lists.find(([, allowed]) => !allowed.has(name));
        if (!refused) return undefined;
        const which = model === undefined ? `the default model "${name}"` : `model "${name}"`;
        return `${which} is not allowed by ${refused[0]}; allowed: ${[...refused[1]].sort().join(', ')}`;
      },
    };
  }

  /**
   * Why a run (or a session message) may not ask for `model` by name, or undefined when it may.
   * The model must pass every list that applies (as `models(...).refusal`); and when no list
   * applies, it must be one the operator configured (`TETRALOOP_MODEL`, `TETRALOOP_PLANNER_MODEL`):
   * a client never picks a model nobody named.
   */
  runModelRefusal(tenant: string, agentId: string, model: string): string | undefined {
    const refused = this.models(tenant, agentId).refusal(model);
    if (refused !== undefined) return refused;
    const listed =
      this.modelsAllow !== undefined ||
      this.tenant(tenant)?.models !== undefined ||
      this.agent(agentId)?.models !== undefined;
    const configured = [this.settings.defaultModel, this.settings.plannerModel].filter(
      (m): m is string => m !== undefined,
    );
    if (listed || configured.includes(model)) return undefined;
    return `unknown model "${model}": configured are ${[...new Set(configured)].sort().join(', ')}; list other models in TETRALOOP_MODELS_ALLOW (or the tenant's or the agent's models) to let runs ask for them`;
  }

  /**
   * `budget` with each field clamped to its ceiling (a request asking more gets the ceiling). No
   * money budget is more than any: under a `costUsd` ceiling a run without one gets the ceiling.
   */
  clampBudget(budget: RunBudget): RunBudget {
    const max = this.settings.budget;
    const costUsd = budget.costUsd === undefined ? max.costUsd : clamp(budget.costUsd, max.costUsd);
    return {
      toolCalls: clamp(budget.toolCalls, max.toolCalls),
      toolTimeMs: clamp(budget.toolTimeMs, max.toolTimeMs),
      tokens: clamp(budget.tokens, max.tokens),
      ...(costUsd !== undefined ? { costUsd } : {}),
    };
  }

  /** The most a run's money budget may be raised to (a budget decision's signal); undefined: no ceiling. */
  maxCostUsd(): number | undefined {
    return this.settings.budget.costUsd;
  }

  /** What `tenant`'s model calls may cost per UTC day, in USD; undefined: no cap. */
  dailyCostUsd(tenant: string): number | undefined {
    return this.tenant(tenant)?.dailyCostUsd;
  }

  /** A run's deadline clamped to the ceiling. */
  clampTimeout(timeoutSeconds: number): number {
    return clamp(timeoutSeconds, this.settings.budget.timeoutSeconds);
  }

  /** How many of `tenant`'s runs may run at once; undefined: no cap. */
  maxRunning(tenant: string): number | undefined {
    return this.tenant(tenant)?.maxConcurrentRuns ?? this.settings.maxRunning;
  }

  /** The request rates of a request of `tenant` (per minute; 0: that bucket is off). */
  rates(tenant: string, keyId: string | null): RequestRates {
    return {
      perKey: keyId === null ? 0 : (this.settings.ratePerKey ?? 0),
      perTenant: this.tenant(tenant)?.requestsPerMinute ?? this.settings.ratePerTenant ?? 0,
    };
  }

  private agent(agentId: string): AgentCeiling | undefined {
    return Object.hasOwn(this.settings.agents, agentId) ? this.settings.agents[agentId] : undefined;
  }

  private tenant(tenant: string): TenantCeiling | undefined {
    return Object.hasOwn(this.settings.tenants, tenant) ? this.settings.tenants[tenant] : undefined;
  }
}

const clamp = (value: number, max: number | undefined): number =>
  max === undefined ? value : Math.min(value, max);

/** No ceilings at all: any agent, tool and model; budgets as asked; no rates or caps. */
export const openCeilings = (defaultModel = 'gpt-4o-mini'): Ceilings =>
  new Ceilings({ agents: {}, agentTools: {}, tenants: {}, modelsAllow: [], defaultModel, budget: {} });
