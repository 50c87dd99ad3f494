/**
 * The job catalog: each loop's queue, its job names and their zod payloads. Handlers and
 * producers derive their types from here.
 */
import { z } from 'zod';
import { TraceCarrier } from '../telemetry/tracing.js';

/**
 * The four loops, each its own queue and worker pool, named alike. The `tool` pool's queue holds
 * the node jobs of every kind (tool, llm, loop, wait): the code calls it the node queue; its name
 * stays `tool` so running deployments, dashboards and scaling rules keep working.
 */
export const POOLS = ['sense', 'plan', 'tool', 'reflect'] as const;
export type Pool = (typeof POOLS)[number];

/** The queue each pool works on. */
export const QUEUE_NAMES = {
  sense: 'sense',
  plan: 'plan',
  tool: 'tool',
  reflect: 'reflect',
} as const satisfies Record<Pool, string>;

/** BullMQ name of a custom tool queue (`crm` → `tool.crm`): beside the `tool` queue, in its shard. */
export const toolQueueName = (queue: string): string => `${QUEUE_NAMES.tool}.${queue}`;

const Generation = z.number().int().nonnegative().default(0);

/** Root job of a run (one per generation), in the `plan` queue; its children are the node jobs. */
export const RunJobData = z.object({
  runId: z.string(),
  generation: Generation,
  /** `start` until the run's ready nodes are enqueued, then `finalize`. */
  step: z.enum(['start', 'finalize']).default('start'),
  /** The trace context of what made the run (tracing on). */
  trace: TraceCarrier.optional(),
});
export type RunJobData = z.input<typeof RunJobData>;

/** Fires when a run's deadline passes, in the `plan` queue (delayed). */
export const DeadlineJobData = z.object({ runId: z.string(), generation: Generation });
export type DeadlineJobData = z.input<typeof DeadlineJobData>;

/** One node of one run, in the `tool` queue. */
export const NodeJobData = z.object({
  runId: z.string(),
  nodeId: z.string(),
  generation: Generation,
  /** Set when a loop or wait node re-enters after parking itself in the delayed set. */
  continuation: z.boolean().default(false),
  /** A continuation's first start (ISO): its node's start and duration count from there. */
  enteredAt: z.string().optional(),
  /**
   * The attempt `enteredAt` belongs to: a retry of the job is a new attempt, which starts (and
   * counts its time limit) anew. Absent on jobs parked before it was kept: `enteredAt` holds.
   */
  enteredAttempt: z.number().int().min(1).optional(),
  /** Set when the job re-enters after flow control held its call back: the call is not charged again. */
  throttled: z.boolean().default(false),
  /** When the node expired and runs its fallback instead (ISO time): its retries run the fallback too. */
  downgraded: z.string().optional(),
  /**
   * Attempts made before this job existed: the node ran handed off in another node's job (see
   * `executor/handoff.ts`) and moved to a job of its own for a retry or to park.
   */
  attemptsBefore: z.number().int().min(0).default(0),
  /** Set when a handed-off node moved here mid-execution: its begin was made, not counted or charged again. */
  moved: z.boolean().default(false),
  /**
   * The attempt a worker shutting down handed back mid-call (`handBack`): that attempt re-enters,
   * begun, not counted or charged again; a later retry of the job is a new attempt.
   */
  resumes: z.number().int().min(1).optional(),
  /**
   * The job a moved node ran handed off in: what its completion released and began there is marked
   * with that job (`carriedBy`), so a redelivery of this job treats those as its own too.
   */
  carrier: z.string().optional(),
  /**
   * A carrier job (`carrierJobId`): it has no node of its own but runs these, a run's first ready
   * nodes started together, side by side as handed-off nodes (see `executor/handoff.ts`).
   * `nodeId` is the first of them.
   */
  carry: z.array(z.string()).min(2).optional(),
  /** A map's item (`<mapId>[<index>]`): the element of the list it runs on. */
  item: z.unknown().optional(),
  /** The trace context of what released the node (tracing on). */
  trace: TraceCarrier.optional(),
});
export type NodeJobData = z.input<typeof NodeJobData>;

/**
 * One call of a custom tool made by an agent or a loop in a process without the tool's code, in the
 * tool's queue (of the calling run's shard): a worker that has the code runs it as it runs a tool
 * node's call and answers its outcome (`ToolOutcome`) as the job's return value.
 */
export const ToolCallJobData = z.object({
  runId: z.string(),
  nodeId: z.string(),
  generation: Generation,
  /** The calling node's attempt (`ctx.attempt`). */
  attempt: z.number().int().min(1),
  /** The agent's id for the call (the model's), or the loop's iteration: for logs. */
  callId: z.string(),
  /** Where the call is in its node's attempt (an agent's turn and call, `3.0`; a loop's iteration). */
  index: z.string(),
  tool: z.string(),
  /** As the caller made them: `{"$secret"}` references are filled in by the worker that runs it. */
  args: z.unknown(),
  secrets: z
    .array(z.object({ name: z.string(), at: z.array(z.union([z.string(), z.number()])) }))
    .default([]),
  /** The call's Idempotency-Key, the same for a retry of the call the harness makes. */
  idempotencyKey: z.string(),
  tenant: z.string(),
  agentId: z.string(),
  /** The schema hash of the tool the run was checked against (a rolling deploy may serve another). */
  expectedSchema: z.string().optional(),
  /** The call's time limit (ms). */
  timeoutMs: z.number().int().positive(),
  /** When the caller stops waiting (epoch ms): a job taken later answers `timeout` without running. */
  deadlineAt: z.number().int(),
  trace: TraceCarrier.optional(),
});
export type ToolCallJobData = z.input<typeof ToolCallJobData>;

/**
 * Job names. `deadline`: a run's deadline job, which processes before run deadlines were swept
 * added. `carry`: a carrier job (`NodeJobData.carry`).
 */
export const JOB = {
  run: 'run',
  deadline: 'deadline',
  cycle: 'cycle',
  node: 'node',
  carry: 'carry',
  call: 'call',
} as const;

const suffix = (generation: number): string => (generation === 0 ? '' : `@${generation}`);

/** Job id of a run's root job. BullMQ forbids ':' in ids; node ids never hold '.' or '@'. */
export const runJobId = (runId: string, generation = 0): string => `${runId}${suffix(generation)}`;
/** Job id of the job that ends a window's cycle budget (window mode). */
export const cycleJobId = (runId: string, generation = 0): string => `${runId}.cycle${suffix(generation)}`;
/** Job id of a node job: derived from run, node and generation so a node is never enqueued twice. */
export const nodeJobId = (runId: string, nodeId: string, generation = 0): string =>
  `${runId}.${nodeId}${suffix(generation)}`;
/**
 * Job id of a carrier job (`NodeJobData.carry`), named by the first node it carries. Node ids
 * never hold '+', so it is never a node job's id: a carried node that moves to a job of its own
 * gets its `nodeJobId`.
 */
export const carrierJobId = (runId: string, firstNodeId: string, generation = 0): string =>
  `${runId}.${firstNodeId}+${suffix(generation)}`;
/**
 * Job id of a remote custom tool call: one per call of one attempt of a node, so a redelivered
 * agent turn finds the call in flight or done instead of making it again.
 */
export const toolCallJobId = (
  data: Pick<ToolCallJobData, 'runId' | 'nodeId' | 'generation' | 'attempt' | 'index'>,
): string => `call.${nodeJobId(data.runId, data.nodeId, data.generation)}.${data.attempt}.${data.index}`;
