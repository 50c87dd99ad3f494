/** The shapes shared by the loop node and its kinds of body. */
import type { UsageCharge } from '../domain/node-snapshot.js';
import type { NodeErrorData } from '../errors/node-error.js';
import type { ChatMessage } from '../model/model-client.js';
import type { RunUsageSoFar } from './kind.js';

/** What an agent iteration records besides the common fields. */
export interface AgentTurn {
  assistant: ChatMessage;
  toolResults: { tool_call_id: string; name: string; content: string }[];
  usage: { promptTokens: number; completionTokens: number; cachedPromptTokens?: number };
  /** What the turn's model call cost, in USD; absent when its model has no price. */
  costUsd?: number;
  /** Steering messages that joined the conversation before this turn. */
  steered?: string[];
  /** The model's reasoning, when the agent asked for it (`thinking.summary`). */
  reasoning?: string;
}

/** One iteration as recorded: what the exit condition is evaluated on. */
export interface Iteration {
  iteration: number;
  status: 'succeeded' | 'failed';
  output?: unknown;
  error?: { code: string; message: string };
  /** For nested-graph bodies: the child run that was this iteration. */
  runId?: string;
  /** For agent bodies: the model's answer and the tool results. */
  turn?: AgentTurn;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
}

export interface IterationResult {
  readonly iteration: Iteration;
  readonly charge: UsageCharge;
  /** The body says the loop is done (an agent answered without asking for a tool). */
  readonly final?: boolean;
}

export type IterationRunner = (n: number, usage: RunUsageSoFar) => Promise<IterationResult>;

/** An iteration ended in a way that ends the node: aborted, out of budget, or the model failed. */
export class NodeEnded extends Error {
  constructor(readonly error: NodeErrorData) {
    super(error.message);
    this.name = 'NodeEnded';
  }
}
