/**
 * The run as clients and every layer see it: statuses, node snapshots and attempts, live node
 * states, budgets and usage, events, and the run document. Types and schemas only.
 */
import { z } from 'zod';
import { RunError } from '../errors/run-error.js';
import type { GraphOf } from '../graph/schema.js';
import type { AttemptRecord, Budget, LiveNodeState, NodeSnapshot } from './node-snapshot.js';
import type { WaitRecord } from './signal.js';

export * from './node-snapshot.js';
export * from './signal.js';

export { RunError };

/** The longest deadline a run may have (`timeoutSeconds`). */
export const MAX_RUN_SECONDS = 86_400;

export const RunStatus = z.enum(['queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out']);
export type RunStatus = z.infer<typeof RunStatus>;

export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set([
  'succeeded',
  'failed',
  'cancelled',
  'timed_out',
]);
export const isTerminal = (status: RunStatus): boolean => TERMINAL_RUN_STATUSES.has(status);

/** A node in the run document; `waits` lists the signals and approvals it waited for, oldest first. */
export type NodeView = {
  id: string;
  waits?: WaitRecord[];
  /** Time its calls spent held back by flow control, in all. */
  throttledMs?: number;
} & (
  | NodeSnapshot
  | (LiveNodeState & { attempts: AttemptRecord[] })
  | { status: 'pending'; attempts: AttemptRecord[] }
);

/** What a run has used so far. */
export interface RunUsage {
  toolCalls: number;
  toolTimeMs: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  modelCalls: number;
}

/** Most tags a run may carry. */
export const MAX_RUN_TAGS = 10;

/** A run's tag: a label to find it by (`GET /v1/runs?tag=`); part of a Redis key name. */
export const RunTag = z
  .string()
  .regex(/^[A-Za-z0-9_.:=/-]{1,64}$/, 'a tag is 1–64 letters, digits or _ . : = / -');
export type RunTag = z.infer<typeof RunTag>;

/** A rerun's origin: the run it forked from and the node it ran again from. */
export interface RerunOf {
  readonly runId: string;
  readonly from: string;
}

/** A run as a search lists it (`GET /v1/runs`): what it is, where it stands, what it used. */
export interface RunListing {
  runId: string;
  status: RunStatus;
  agentId: string;
  /** As stored (tenant-scoped); the API shows it as the client named it. */
  sessionKey: string | null;
  /** The first 200 characters of a task run's task. */
  task: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** From `startedAt` (`createdAt` for a run that never started) to `finishedAt`; null until settled. */
  durationMs: number | null;
  /** Nodes of its plan (0 while a task run waits for its plan), and how many of them succeeded and failed. */
  nodes: { total: number; succeeded: number; failed: number };
  usage: RunUsage;
  tags: string[];
  rerunOf: RerunOf | null;
}

/** The stream families clients follow: each event type belongs to one, with a phase. */
export type EventFamily = 'lifecycle' | 'plan' | 'node' | 'tool' | 'assistant' | 'usage' | 'environment';

/** Family and phase of an event type (`run.finished` → lifecycle/end or error, `tool.start` → tool/start…). */
export function familyOf(type: string, data: unknown): { family: EventFamily; phase: string } {
  const [head = '', tail = ''] = type.split('.');
  switch (head) {
    case 'run': {
      if (tail === 'finished') {
        const status = (data as { status?: string } | undefined)?.status;
        return { family: 'lifecycle', phase: status === 'succeeded' ? 'end' : 'error' };
      }
      return { family: 'lifecycle', phase: tail === 'decided' ? 'update' : 'start' };
    }
    case 'plan':
    case 'replan':
      return { family: 'plan', phase: tail || 'created' };
    case 'tool':
      return { family: 'tool', phase: tail };
    case 'assistant':
      return { family: 'assistant', phase: tail };
    case 'usage':
      return { family: 'usage', phase: 'update' };
    case 'node':
      return { family: 'node', phase: tail };
    default:
      return { family: 'environment', phase: tail || head };
  }
}

/** One entry of a run's event stream. */
export interface RunEvent {
  seq: number;
  type: string;
  family?: EventFamily;
  phase?: string;
  ts: number;
  runId: string;
  nodeId?: string;
  data?: unknown;
}

/** What the API returns for a run. */
export interface RunDocument {
  runId: string;
  status: RunStatus;
  createdAt: string;
  startedAt: string | null;
  /** Set once the run has settled: its outcome is decided and every node is final. */
  finishedAt: string | null;
  /** The graph as submitted or planned; null while a task run waits for its plan. */
  /** Validated before it was stored: its nodes are of the kinds in `nodes/` (`Graph` there). */
  graph: GraphOf | null;
  /** The task of a task run. */
  task: string | null;
  agentId: string;
  /** The tenant the run belongs to (the tenant of the key that made it). */
  tenant: string;
  /** The session whose lane the run belongs to. */
  sessionKey: string | null;
  /** While a session run waits for its turn: its place in the lane (1 = next). */
  lanePosition: number | null;
  /** How the current plan was made (task runs). */
  planning: PlanningRecord | null;
  replans: number;
  input: unknown;
  timeoutSeconds: number;
  budget: Budget;
  usage: RunUsage;
  /** Bumped by every resume; node jobs of older generations are discarded. */
  generation: number;
  metadata: Record<string, unknown> | null;
  /** 1 (lowest) to 10: which waiting calls flow control serves first. */
  priority: number;
  /** Labels given at creation, to find the run by. */
  tags: string[];
  /** For a rerun: the run it forked from and the node it ran again from. */
  rerunOf: RerunOf | null;
  /** Every executable node (nested graphs expanded), by id. */
  nodes: Record<string, NodeView>;
  /** Sink node outputs keyed by node id, once the run succeeded. */
  output: Record<string, unknown> | null;
  error: RunError | null;
}

/** What a task run asks for, kept with the run so the plan loop can plan and replan it. */
export interface TaskSpec {
  readonly task: string;
  /** `loop` runs work the task with the agent loop and are never planned or replanned. @defaultValue "dag" */
  readonly mode?: 'dag' | 'loop';
  readonly agentId: string;
  /** @defaultValue DEFAULT_TENANT */
  readonly tenant?: string;
  readonly overrides?: string;
  readonly maxReplans: number;
}

/** How a plan was made, recorded with the run so it can be replayed. */
export interface PlanningRecord {
  readonly plannerModel: string;
  readonly promptVersion: string;
  readonly toolCatalogVersion: string;
  /** The run generation the plan was made for. */
  readonly planVersion: number;
  /** The session environment version the plan was made from (0 outside sessions). */
  readonly environmentVersion: number;
  /** The agent's lessons version the plan was made with, and the lessons its prompt stated. */
  readonly lessonsVersion?: number;
  readonly lessons?: readonly string[];
  /**
   * A first plan with the plan cache on: `hit` when it came from the cache (no planner call),
   * `miss` when the planner was asked. Absent for replans and with the cache off.
   */
  readonly cache?: 'hit' | 'miss';
  /** On a hit: the run the cached plan was made for. */
  readonly cachedFrom?: string;
}
