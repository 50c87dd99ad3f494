/**
 * What a client can do with runs: submit (validated, idempotent), read, cancel, wait.
 * Used by the HTTP API; holds no process state besides its connections.
 */
import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import { validateGraph, type GraphLimits, type ValidationIssue } from '../graph/validate.js';
import { JOB, runJobId, type RunJobData } from '../queues/catalog.js';
import { keepJobs, type JobRetention } from '../queues/retention.js';
import type { RunStore } from '../state/run-store.js';
import type { ToolRegistry } from '../tools/tool.js';
import { isTerminal, type RunDocument, type RunStatus } from './run-model.js';
import type { RunRequest } from './run-request.js';

export class GraphRejectedError extends Error {
  constructor(readonly issues: readonly ValidationIssue[]) {
    super(`graph rejected: ${issues.length} problem(s)`);
    this.name = 'GraphRejectedError';
  }
}

export interface SubmitResult {
  readonly runId: string;
  readonly status: RunStatus;
  readonly acceptedAt: string;
  /** False when an earlier request with the same idempotency key created the run. */
  readonly created: boolean;
}

export interface RunServiceDeps {
  readonly store: RunStore;
  readonly planQueue: Queue<RunJobData>;
  readonly tools: ToolRegistry;
  readonly limits: GraphLimits;
  readonly retention: JobRetention;
}

export class RunService {
  constructor(private readonly deps: RunServiceDeps) {}

  /** Validates the whole graph, stores the run and enqueues its root job. Nothing runs if invalid. */
  async submit(request: RunRequest, idempotencyKey?: string): Promise<SubmitResult> {
    const validation = validateGraph(request.graph, { tools: this.deps.tools, limits: this.deps.limits });
    if (!validation.ok)
      throw new GraphRejectedError(validation.issues.map((i) => ({ ...i, path: join('graph', i.path) })));

    const runId = randomUUID();
    if (idempotencyKey !== undefined) {
      const existing = await this.deps.store.claimIdempotencyKey(idempotencyKey, runId);
      if (existing !== null) return this.replay(existing);
    }
    const acceptedAt = new Date().toISOString();
    const pending = new Map(
      validation.topology.ids.map((id) => [id, validation.topology.parents.get(id)?.length ?? 0]),
    );
    try {
      await this.deps.store.create({
        runId,
        graph: validation.graph,
        input: request.input,
        timeoutSeconds: request.timeoutSeconds,
        metadata: request.metadata,
        createdAt: acceptedAt,
        pending,
      });
      await this.enqueue(runId);
    } catch (err) {
      // Let a retry with the same key create the run instead of finding a half-made one.
      if (idempotencyKey !== undefined)
        await this.deps.store.releaseIdempotencyKey(idempotencyKey).catch(() => undefined);
      throw err;
    }
    return { runId, status: 'queued', acceptedAt, created: true };
  }

  /** Answers a repeated idempotent request with the existing run, re-enqueueing it if it never started. */
  private async replay(runId: string): Promise<SubmitResult> {
    const doc = await this.deps.store.document(runId);
    if (!doc) throw new Error(`run ${runId} for this idempotency key is being created; retry`);
    // The root job id is the run id, so this adds nothing when the job already exists.
    if (doc.status === 'queued') await this.enqueue(runId);
    return { runId, status: doc.status, acceptedAt: doc.createdAt, created: false };
  }

  private async enqueue(runId: string): Promise<void> {
    await this.deps.planQueue.add(
      JOB.run,
      { runId, step: 'start' },
      { jobId: runJobId(runId), ...keepJobs(this.deps.retention) },
    );
  }

  get(runId: string): Promise<RunDocument | null> {
    return this.deps.store.document(runId);
  }

  /**
   * Cancels a run that has not finished: its status becomes `cancelled` at once, running nodes are
   * aborted, nothing else starts. Returns the status after the call, or null for an unknown run.
   */
  async cancel(runId: string): Promise<{ status: RunStatus; cancelled: boolean } | null> {
    const status = await this.deps.store.status(runId);
    if (status === null) return null;
    if (isTerminal(status)) return { status, cancelled: false };
    const cancelled = await this.deps.store.decide(
      runId,
      'cancelled',
      { code: 'cancelled', message: 'cancelled by request' },
      new Date().toISOString(),
    );
    return { status: (await this.deps.store.status(runId)) ?? 'cancelled', cancelled };
  }
}

const join = (head: string, tail: string): string => (tail ? `${head}.${tail}` : head);
