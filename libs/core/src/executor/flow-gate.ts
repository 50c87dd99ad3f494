/**
 * Flow control where calls are made: before a node's tool or model call, the gate asks Redis for
 * capacity on every counter the call falls under (`flow/limits.ts`). A call that may not go yet is
 * not failed: when it is the first call of its job, the job parks in BullMQ's delayed set (holding
 * no worker) and is woken when its turn comes; a later call of the same job (inside a loop) waits
 * in the worker. After the call the gate settles its token reservation to the tokens used, and a
 * `429` cuts and pauses the service's counters for everyone.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { NodeErrorData } from '../errors/node-error.js';
import { flowKeysFor, reservedTokens, type FlowKey, type LimitsDocument } from '../flow/limits.js';
import type { FlowDecision, FlowStore, HeldCall } from '../state/flow-store.js';
import { metrics } from '../telemetry/metrics.js';
import type { NodeStates } from '../state/runs/node-state.js';
import type { CompiledPlan } from './plan-cache.js';
import { OwnJobNeeded } from './handoff.js';

export interface FlowSettings {
  /** `TETRALOOP_LIMITS`; limits set with `PUT /v1/limits` replace them. */
  readonly configured: LimitsDocument;
  /** How often a process looks for limits set through the API. @defaultValue 2000 */
  readonly refreshMs: number;
  /** How often waiters are granted when a rate's interval moves on or a pause ends. @defaultValue 50 */
  readonly tickMs: number;
  /** The longest a held-back job sleeps before it asks again (it is woken sooner when granted). @defaultValue 5000 */
  readonly recheckMs: number;
  /** Completion tokens a model call reserves besides its prompt. @defaultValue 1024 */
  readonly completionTokens: number;
  /** Capacity held past a call's own time limit before it is taken back from a dead worker. @defaultValue 30000 */
  readonly leaseMarginMs: number;
}

export const DEFAULT_FLOW_SETTINGS: Omit<FlowSettings, 'configured'> = {
  refreshMs: 2000,
  tickMs: 50,
  recheckMs: 5000,
  completionTokens: 1024,
  leaseMarginMs: 30_000,
};

/** One process's view of flow control: the limits in force, the counters, and waking granted jobs. */
export class FlowGate {
  private current: LimitsDocument;
  private fetchedAt = 0;
  private refreshing: Promise<void> | undefined;
  private ticker: NodeJS.Timeout | undefined;
  private ticking = false;

  constructor(
    readonly store: FlowStore,
    readonly settings: FlowSettings,
    /** A node job by its id (in its shard's tool queue), promoted out of the delayed set when granted. */
    private readonly jobOf: (jobId: string) => Promise<Job | undefined>,
    private readonly log: Logger,
  ) {
    this.current = settings.configured;
  }

  /** The limits in force: set through the API, else configured. Refreshed every `refreshMs`. */
  async limits(): Promise<LimitsDocument> {
    if (Date.now() - this.fetchedAt >= this.settings.refreshMs) {
      this.refreshing ??= this.store
        .storedLimits()
        .then((stored) => {
          this.current = stored?.document ?? this.settings.configured;
          this.fetchedAt = Date.now();
        })
        .catch((err: unknown) => this.log.warn({ err }, 'could not read the stored flow limits'))
        .finally(() => (this.refreshing = undefined));
      await this.refreshing;
    }
    return this.current;
  }

  /** The limits in force when they need no refresh; undefined when they do. */
  cachedLimits(): LimitsDocument | undefined {
    return Date.now() - this.fetchedAt < this.settings.refreshMs ? this.current : undefined;
  }

  /** Lease of a call limited to `limitMs`: held that long past it at most. */
  leaseFor(limitMs: number): number {
    return Math.max(1000, Math.ceil(limitMs)) + this.settings.leaseMarginMs;
  }

  /** Wakes the jobs of granted calls (promotes them out of the delayed set). Never throws. */
  wake(members: readonly string[]): void {
    for (const member of members) void this.wakeOne(member);
  }

  private async wakeOne(member: string): Promise<void> {
    try {
      const job = await this.jobOf(member);
      if (!job) {
        // The job is gone (its run expired or was deleted): its grant goes to the next waiter.
        this.wake(await this.store.release(member, { succeeded: false, leaseMs: this.leaseFor(0) }));
        return;
      }
      await job.promote().catch(async () => {
        // A job not parked yet (still moving to the delayed set) is woken again by the tick; one
        // that ended without asking again gives its grant to the next waiter.
        const state = await job.getState();
        if (state === 'completed' || state === 'failed')
          this.wake(await this.store.release(member, { succeeded: false, leaseMs: this.leaseFor(0) }));
      });
    } catch (err) {
      this.log.warn({ err, member }, 'could not wake a granted call');
    }
  }

  /** Wakes the calls a flow script granted once it answers; a failure is logged, never thrown. */
  settle(answer: Promise<readonly string[]>): void {
    answer.then(
      (granted) => this.wake(granted),
      (err: unknown) => this.log.warn({ err }, 'flow control could not give capacity back'),
    );
  }

  /** Starts the periodic grant step (only while any limit is in force). */
  start(): void {
    this.ticker ??= setInterval(() => void this.tick(), this.settings.tickMs);
    this.ticker.unref();
  }

  private async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      if ((await this.limits()).limits.length === 0) return;
      const woken = await this.store.tick({
        leaseMs: this.leaseFor(0) + this.settings.recheckMs,
        rewakeMs: 1000,
        perKey: 100,
      });
      this.wake(woken);
    } catch (err) {
      this.log.warn({ err }, 'flow control tick failed');
    } finally {
      this.ticking = false;
    }
  }

  stop(): void {
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = undefined;
  }
}

/** A call flow control let go: report how it ended. */
export interface FlowPass {
  /** The counters it was taken on. */
  readonly keys: readonly FlowKey[];
  end(outcome: CallEnd): Promise<void>;
}

export interface CallEnd {
  readonly succeeded: boolean;
  /** Model calls: prompt + completion tokens used. */
  readonly usedTokens?: number;
  /** The service answered `429`. */
  readonly rateLimited?: boolean;
  /** How long the service asked everyone to hold off (`Retry-After`, or a limit used up). */
  readonly holdOffMs?: number;
}

/** How a failed call ended, for flow control: a `429` with the delay it asked for. */
export function failedCallEnd(error: NodeErrorData): CallEnd {
  if (error.code !== 'rate_limited') return { succeeded: false };
  return {
    succeeded: false,
    rateLimited: true,
    ...(error.retryAfterMs !== undefined ? { holdOffMs: error.retryAfterMs } : {}),
  };
}

/** The execution a call belongs to, as the gate needs it (a `NodeContext` is one). */
export interface FlowContext {
  readonly deps: { readonly flow?: FlowGate; readonly store: Pick<NodeStates, 'recordThrottle'> };
  readonly job: Job;
  readonly token: string | undefined;
  /** A handed-off node (`handoff.ts`): `job` is its carrier's, so it never parks it. */
  readonly inline: boolean;
  readonly plan: Pick<CompiledPlan, 'runId' | 'tenant' | 'agentId' | 'metadata' | 'priority'>;
  readonly node: { readonly id: string };
  readonly attempt: number;
  readonly startedAt: string;
  readonly runSignal: AbortSignal;
  readonly call: { flowCalls?: number; early?: EarlyAsk };
}

/** What a call is, as the gate needs it. */
export interface GatedCall {
  readonly tool: string;
  readonly model?: string;
  readonly host?: string;
  /** Model calls: characters of the prompt, for the token reservation. */
  readonly promptChars?: number;
  /** The call's time limit, for how long its capacity is held at most. */
  readonly limitMs: number;
}

/**
 * A node's first call asked for before the node's start was read: the ask goes out beside the
 * start script, so a call under a limit that does not bind waits for no round trip of its own.
 */
export interface EarlyAsk {
  readonly member: string;
  readonly keys: readonly FlowKey[];
  readonly tokens: number;
  readonly leaseMs: number;
  readonly decision: Promise<FlowDecision>;
  /** Set once `passFlow` took the answer as its first. */
  taken: boolean;
}

/**
 * Asks early for the capacity of a call known before its node starts (a tool node whose arguments
 * hold no references, so its tool and target are known). Undefined when no limit applies, or the
 * limits are not at hand without a round trip.
 */
export function askEarly(
  gate: FlowGate | undefined,
  plan: FlowContext['plan'],
  member: string,
  call: GatedCall,
): EarlyAsk | undefined {
  const doc = gate?.cachedLimits();
  if (!gate || !doc || doc.limits.length === 0) return undefined;
  const keys = flowKeysFor(doc, {
    tool: call.tool,
    ...(call.host !== undefined ? { host: call.host } : {}),
    tenant: plan.tenant,
    agent: plan.agentId,
    metadata: plan.metadata,
    tokens: 0,
  });
  if (keys.length === 0) return undefined;
  const leaseMs = gate.leaseFor(call.limitMs);
  const decision = gate.store.acquire(member, keys, { priority: plan.priority, tokens: 0, leaseMs });
  // Read by `passFlow`, or given back by `dropEarly`; never left unhandled.
  decision.catch(() => undefined);
  return { member, keys, tokens: 0, leaseMs, decision, taken: false };
}

/** Gives back an early ask no call took (the node did not run, or asked for something else). */
export async function dropEarly(gate: FlowGate | undefined, early: EarlyAsk | undefined): Promise<void> {
  if (!gate || !early || early.taken) return;
  early.taken = true;
  const decision = await early.decision.catch(() => undefined);
  gate.wake(
    await gate.store.release(early.member, {
      succeeded: false,
      leaseMs: early.leaseMs,
      ...(decision?.ok && decision.held ? { held: decision.held } : {}),
    }),
  );
}

const sameKeys = (a: readonly FlowKey[], b: readonly FlowKey[]): boolean =>
  a.length === b.length && a.every((k, i) => k.id === b[i]!.id);

/**
 * Waits for the capacity `call` needs. Answers a pass to report the call's end with (none when no
 * limit applies), or an error when the run ended while it waited. A first call of its job that must
 * wait parks the job instead: this throws BullMQ's DelayedError, which the worker understands.
 */
export async function passFlow(
  ctx: FlowContext,
  call: GatedCall,
): Promise<{ ok: true; pass?: FlowPass } | { ok: false; error: NodeErrorData }> {
  const gate = ctx.deps.flow;
  if (!gate) return { ok: true };
  const doc = await gate.limits();
  if (doc.limits.length === 0) return { ok: true };
  const tokens = call.model ? reservedTokens(call.promptChars ?? 0, gate.settings.completionTokens) : 0;
  const keys = flowKeysFor(doc, {
    tool: call.tool,
    ...(call.model !== undefined ? { model: call.model } : {}),
    ...(call.host !== undefined ? { host: call.host } : {}),
    tenant: ctx.plan.tenant,
    agent: ctx.plan.agentId,
    metadata: ctx.plan.metadata,
    tokens,
  });
  if (keys.length === 0) return { ok: true };
  // Counters hold jobs by id: a handed-off node asks from a job of its own.
  if (ctx.inline) throw new OwnJobNeeded('pass flow control');
  const member = ctx.job.id ?? `${ctx.plan.runId}.${ctx.node.id}`;
  const leaseMs = gate.leaseFor(call.limitMs);
  const first = ctx.call.flowCalls === undefined;
  ctx.call.flowCalls = (ctx.call.flowCalls ?? 0) + 1;
  const limitOf = (key: string): string => keys.find((k) => k.id === key)?.limit ?? 'unknown';
  // A job re-entering after being held back has announced its wait already.
  let announced = (ctx.job.data as { throttled?: boolean }).throttled === true;
  // The first call's early ask is its first answer when it asked for the same counters, with a
  // lease as long; else it is given back before asking again.
  const early = first ? ctx.call.early : undefined;
  const useEarly =
    early !== undefined &&
    !early.taken &&
    early.tokens === tokens &&
    early.leaseMs >= leaseMs &&
    sameKeys(early.keys, keys);
  if (early && !useEarly) await dropEarly(gate, early);
  for (let ask = 0; ; ask++) {
    const decision =
      ask === 0 && useEarly
        ? await takeEarly(early)
        : await gate.store.acquire(member, keys, { priority: ctx.plan.priority, tokens, leaseMs });
    gate.wake(decision.granted);
    if (decision.ok) {
      if (decision.waitedMs > 0) {
        metrics.flowWait.observe({ limit: keys[0]!.limit }, decision.waitedMs / 1000);
        await ctx.deps.store.recordThrottle(ctx.plan.runId, ctx.node.id, {
          live: { status: 'running', startedAt: ctx.startedAt, attempt: ctx.attempt },
          waitedMs: decision.waitedMs,
        });
      }
      const held = useEarly && ask === 0 ? early.leaseMs : leaseMs;
      return { ok: true, pass: passOf(gate, member, keys, held, decision.held) };
    }
    const delay = Math.min(Math.max(decision.waitMs ?? gate.settings.recheckMs, 20), gate.settings.recheckMs);
    const until = Date.now() + delay;
    const event = announced ? undefined : { key: decision.key, waitMs: decision.waitMs };
    if (!announced) metrics.flowThrottled.inc({ limit: limitOf(decision.key) });
    announced = true;
    if (first && ctx.token !== undefined) {
      await ctx.deps.store.recordThrottle(ctx.plan.runId, ctx.node.id, {
        live: {
          status: 'throttled',
          key: decision.key,
          until: new Date(until).toISOString(),
          attempt: ctx.attempt,
        },
        ...(event ? { event } : {}),
      });
      await ctx.job.updateData({ ...(ctx.job.data as object), throttled: true });
      await ctx.job.moveToDelayed(until, ctx.token);
      throw new DelayedError();
    }
    if (event) await ctx.deps.store.recordThrottle(ctx.plan.runId, ctx.node.id, { event });
    try {
      await sleep(delay, undefined, { signal: ctx.runSignal });
    } catch {
      gate.wake(await gate.store.release(member, { succeeded: false, leaseMs }));
      return { ok: false, error: { code: 'aborted', message: 'run aborted' } };
    }
  }
}

function takeEarly(early: EarlyAsk): Promise<FlowDecision> {
  early.taken = true;
  return early.decision;
}

function passOf(
  gate: FlowGate,
  member: string,
  keys: readonly FlowKey[],
  leaseMs: number,
  held: HeldCall | undefined,
): FlowPass {
  return {
    keys,
    // Sent, not awaited: the node's next step need not wait for it. Commands of one connection run
    // in order, so a later call of the same job asks only after this one has given its capacity back.
    end: (outcome) => {
      const service = keys.filter((k) => k.service);
      if (service.length > 0 && (outcome.rateLimited || outcome.holdOffMs !== undefined)) {
        for (const k of service) metrics.flowPenalties.inc({ limit: k.limit });
        gate.settle(
          gate.store
            .penalize(
              service.map((k) => k.id),
              outcome.holdOffMs,
              outcome.rateLimited === true,
            )
            .then(() => []),
        );
      }
      gate.settle(
        gate.store.release(member, {
          ...(outcome.usedTokens !== undefined ? { usedTokens: outcome.usedTokens } : {}),
          succeeded: outcome.succeeded,
          leaseMs,
          ...(held ? { held } : {}),
        }),
      );
      return Promise.resolve();
    },
  };
}

/** A job whose held-back call will not be made: its place (or grant) goes to the next waiter. */
export async function leaveFlow(deps: { readonly flow?: FlowGate }, job: Job): Promise<void> {
  const gate = deps.flow;
  if (!gate || job.id === undefined) return;
  gate.wake(await gate.store.release(job.id, { succeeded: false, leaseMs: gate.leaseFor(0) }));
}
