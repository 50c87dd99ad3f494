/**
 * Signals and the waits that take them: a signal is delivered only where something may take it
 * (`signal-6.lua`), and a node's wait registers itself, its deadline and (for an approval) its
 * nonce on its first read (`wait-state-6.lua`). A wait node that sleeps to a time takes no signal:
 * its wake time is kept once (`sleep-state-6.lua`).
 */
import { SignalDecision, type LiveNodeState } from '../../domain/run-model.js';
import { parseJson, type RunContext } from './run-context.js';

/** What `signal-6.lua` answers. */
export type SignalDelivery =
  'delivered' | 'duplicate' | 'unknown_run' | 'run_finished' | 'not_awaited' | 'too_many' | 'not_raised';

/** One wait of a node, as `waitState` takes it. */
export interface WaitSpec {
  readonly nodeId: string;
  /** Names the wait's deadline and nonce; @defaultValue the node id (a wait node's one wait) */
  readonly key?: string;
  /** The signal's name, or with `nonce` its prefix. */
  readonly signal: string;
  /** An approval's nonce candidate: kept on the first call, then always the same. */
  readonly nonce?: string;
  readonly approval?: { readonly tool: string; readonly reason: string };
  /** A model call paused over the run's money budget: the budget and what was spent (USD). */
  readonly budget?: { readonly costUsd: number; readonly spentUsd: number };
}

export interface WaitState {
  readonly payload: unknown;
  readonly delivered: boolean;
  readonly deadlineAt: number;
  /** The signal's full name (an approval's with its nonce). */
  readonly signal: string;
  readonly decidedBy: SignalDecision | null;
}

/** Where a sleeping wait node stands: its wake time (kept from its first call) and whether it is over. */
export interface SleepState {
  readonly wakeAt: number;
  readonly woke: boolean;
}

export class RunSignals {
  constructor(private readonly ctx: RunContext) {}

  /**
   * Delivers a signal if something may take it (see `signal-6.lua`): a wait that began and is not
   * over, or a wait node declaring the name with `acceptEarly`. Records `decision` with it.
   */
  async signal(
    runId: string,
    name: string,
    payload: unknown,
    decision: SignalDecision,
    maxPerRun: number,
    raise?: { readonly costUsd: number },
  ): Promise<SignalDelivery> {
    const result = (await this.ctx.script('signal-6', this.ctx.scriptKeys(runId), [
      name,
      JSON.stringify(payload ?? null),
      JSON.stringify(decision),
      maxPerRun,
      Date.now(),
      raise ? JSON.stringify(raise) : '',
    ])) as SignalDelivery;
    return result;
  }

  /**
   * One wait of a node: the signal's payload (if delivered), who decided it, its deadline (set on
   * the first call, which also registers the wait) and its signal name. `wait.nonce` makes it an
   * approval: its name is `wait.signal` followed by the nonce kept on the first call.
   */
  async waitState(
    runId: string,
    wait: WaitSpec,
    deadlineAt: number,
    live: LiveNodeState,
  ): Promise<WaitState> {
    const [payload, deadline, signal, decision] = (await this.ctx.script(
      'wait-state-6',
      this.ctx.scriptKeys(runId),
      [
        wait.nodeId,
        wait.key ?? wait.nodeId,
        wait.signal,
        wait.nonce ?? '',
        deadlineAt,
        new Date(deadlineAt).toISOString(),
        JSON.stringify(live),
        JSON.stringify({
          since: new Date().toISOString(),
          ...(wait.approval ? { approval: wait.approval } : {}),
          ...(wait.budget ? { budget: wait.budget } : {}),
        }),
      ],
    )) as [string | null, number, string, string | null];
    return {
      payload: parseJson(payload),
      delivered: payload !== null,
      deadlineAt: deadline,
      signal,
      decidedBy: decision ? SignalDecision.parse(JSON.parse(decision)) : null,
    };
  }

  /**
   * A sleeping wait node: its wake time (`wakeAt` on the first call, the first call's after that)
   * and whether `now` is past it; `node.woke` is appended once, by the first call that finds it so.
   */
  async sleepState(
    runId: string,
    nodeId: string,
    wakeAt: number,
    now: number,
    live: LiveNodeState,
  ): Promise<SleepState> {
    const [wake, woke] = (await this.ctx.script('sleep-state-6', this.ctx.scriptKeys(runId), [
      nodeId,
      wakeAt,
      now,
      JSON.stringify(live),
    ])) as [number, number];
    return { wakeAt: wake, woke: woke === 1 };
  }
}
