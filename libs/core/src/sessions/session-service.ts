/**
 * Sessions, gateway style: a session key is a lane whose runs execute one at a time in arrival
 * order. A message to a busy session is handled by its mode (followup, collect, steer,
 * interrupt); `/new`, `/reset` and `/stop` are commands. Lanes, transcripts and environments live
 * in Redis, so they survive any process restart; a sweep keeps lanes moving if a process dies
 * between a run settling and its lane moving on.
 */
import { unscopeName } from '../domain/tenant.js';
import { UNTRUSTED_DATA_NOTE, untrustedData } from '../model/untrusted-data.js';
import { createHash, randomUUID } from 'node:crypto';
import { derivedRunId } from '../domain/run-id.js';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { RunDocument } from '../domain/run-model.js';
import type { RunArchiver } from '../archive/run-archiver.js';
import { cancelledError } from '../errors/run-error.js';
import type { HookRegistry } from '../hooks/hook-registry.js';
import { Thinking } from '../model/thinking.js';
import { agentPrompt, promptBuildContext, type AgentPromptDeps } from '../planning/agent-prompt.js';
import type { LessonBook } from '../reflect/lesson-book.js';
import { wakeParkedNodes, type RunQueues } from '../queues/run-jobs.js';
import type { SkillLimits } from '../workspace/skills.js';
import { BOOTSTRAP_FILES, readWorkspace } from '../workspace/workspace.js';
import { MAX_TASK_CHARS, RunRequest } from '../runs/run-request.js';
import type { RunService } from '../runs/run-service.js';
import type { RunStore } from '../state/runs/run-store.js';
import {
  LANE_MODES,
  type DropPolicy,
  type HistoryWindow,
  type LaneMessage,
  type LaneMode,
  type SessionStore,
} from '../state/session-store.js';
import type { RedisClient } from '../state/redis-client.js';
import { z } from 'zod';
import { dedupeKey } from '../state/keys.js';
import { metrics } from '../telemetry/metrics.js';
import { QUEUE_ARGUMENTS, parseQueueCommand } from './commands.js';
import {
  cappedSummary,
  coversOf,
  historyParts,
  historyTokens,
  planCompaction,
  summaryCharsOf,
  summaryInputCharsOf,
  summaryPrompt,
  truncatedSummary,
  type CompactionPlan,
  type Summarizer,
} from './compaction.js';
import { SENSE_JOB, type MessageInput } from './sense-jobs.js';
import { replyOf } from './reply.js';

export interface SessionConfig {
  /** @defaultValue "collect" */
  readonly defaultMode: LaneMode;
  /** @defaultValue 1000 */
  readonly collectDebounceMs: number;
  /** @defaultValue 20 */
  readonly collectCap: number;
  /** @defaultValue "summarize" */
  readonly collectDrop: DropPolicy;
  /** Most runs waiting in one lane; a `followup` message past it is refused. @defaultValue 100 */
  readonly followupCap: number;
  /** How session runs work: the classic agent loop (conversational) or a planned DAG. @defaultValue "loop" */
  readonly runMode: 'loop' | 'dag' | 'window';
  /** Recent events kept in a session's environment. @defaultValue 100 */
  readonly environmentCap: number;
  /** Duplicate window of event ids. @defaultValue 600 */
  readonly dedupeWindowSeconds: number;
  /**
   * A message without an `eventId` whose content (mode, text, metadata) was admitted to its session
   * within this is a double submission, taken once; 0 turns it off. @defaultValue 2000
   */
  readonly contentDedupeMs?: number;
  /**
   * Compaction: when the history a run would see (the latest summary and the messages after it)
   * is estimated past this many tokens, its older turns are folded into a summary.
   * @defaultValue 8000
   */
  readonly compactTokens: number;
  /** Compaction also happens when the transcript lines after the latest compaction pass this. @defaultValue 1000 */
  readonly compactLines: number;
  /** Limit of the model call that writes a summary; past it, the summary is a truncation. @defaultValue 30000 */
  readonly compactTimeoutMs: number;
  readonly workspaceDir: string;
  readonly workspaceFileChars: number;
  /** How many skills an agent may have, and how large each may be. */
  readonly skillLimits: SkillLimits;
  /** The agent of a session whose first message names none. @defaultValue SESSION_AGENT */
  readonly agentId: string;
}

/** The agent a session runs when its first message names none. */
export const SESSION_AGENT = 'main';

/**
 * How long a pass holds the lease on writing a reply: longer than a reply takes (a document read,
 * the message_sending hooks within their timeouts, one script), short enough that the lane sweep
 * soon writes the reply of a pass that died holding it.
 */
const REPLY_LEASE_MS = 60_000;

/** What a session run is made with besides its text: its session's agent, and the message's model options. */
interface RunCall {
  readonly agentId: string;
  readonly model?: string;
  readonly thinking?: Thinking;
  /** The secrets granted to the run's planned nodes. */
  readonly secrets?: readonly string[];
  /** Outside data the run is handed as delimited blocks, never as its text (see `wakeData`). */
  readonly data?: readonly string[];
}

export interface SessionDeps {
  readonly redis: RedisClient;
  readonly prefix: string;
  readonly sessions: SessionStore;
  readonly store: RunStore;
  readonly runs: RunService;
  /** The node queues, whose parked jobs a cancel wakes. */
  readonly queues: Pick<RunQueues, 'shardOf' | 'toolQueueNames'>;
  readonly senseQueue: Queue;
  readonly hooks: HookRegistry | undefined;
  /** The lessons in effect: the hard, soft and prefer ones join a session run's system prompt. */
  readonly lessons?: LessonBook;
  /** The tools each agent may use: a skill that needs another is refused. */
  readonly allowedTools: (agentId: string) => ReadonlySet<string>;
  /** Writes compaction summaries; without it (no model configured) they are truncations. */
  readonly summarize?: Summarizer;
  /** Where transcripts are archived once a session run settled; absent: nowhere. */
  readonly archive?: RunArchiver;
  readonly config: SessionConfig;
  readonly logger: Logger;
}

export const MessageResult = z.object({
  sessionKey: z.string(),
  /** The run the message made, or (`steer`) the running run it went to. */
  runId: z.string().optional(),
  queued: z.boolean(),
  /** Its place among the lane's waiting items (1 = next). */
  position: z.number().int().positive().optional(),
  /** The `eventId` was seen before. */
  duplicate: z.literal(true).optional(),
  /** `collect` with a full buffer and the drop policy `new`. */
  dropped: z.literal(true).optional(),
  /** `/stop`, `/new`, `/reset` or `/queue` was carried out. */
  command: z.string().optional(),
  /** After `/queue`: the session's default mode from now on. */
  mode: z.enum(LANE_MODES).optional(),
  /**
   * The message was refused and nothing of it kept: `lane_full`, at `limit` waiting runs; or
   * `agent_conflict`, the session being bound to another agent, `agentId`.
   */
  refused: z
    .union([
      z.object({ code: z.literal('lane_full'), limit: z.number().int().positive() }),
      z.object({ code: z.literal('agent_conflict'), agentId: z.string() }),
    ])
    .optional(),
});
export type MessageResult = z.infer<typeof MessageResult>;

/** A message's content id: what a double submission repeats (mode, text, metadata). */
function contentIdOf(input: MessageInput, mode: string): string {
  const content = JSON.stringify([mode, input.text, input.metadata ?? null]);
  return `content:${createHash('sha256').update(content).digest('hex').slice(0, 32)}`;
}

export class SessionService {
  private readonly promptDeps: AgentPromptDeps;

  constructor(private readonly deps: SessionDeps) {
    const { config } = deps;
    this.promptDeps = {
      workspaceDir: config.workspaceDir,
      workspaceFileChars: config.workspaceFileChars,
      skillLimits: config.skillLimits,
      allowedTools: deps.allowedTools,
      ...(deps.hooks ? { hooks: deps.hooks } : {}),
      ...(deps.lessons ? { lessons: deps.lessons } : {}),
      logger: deps.logger,
    };
  }

  /**
   * Takes a message in: a command is carried out; any other message is stored with its run and
   * admitted to the lane in one step with its transcript line (see lane-admit-6.lua).
   *
   * Handling a message again is safe. `deliveryId` names this delivery (the API gives each request
   * one; a sense job redelivered after its worker died carries it again), and the message's run id
   * derives from it, so a second handling finds the run the first one stored. The message's id —
   * its `eventId`, else the delivery — is admitted once within the dedupe window: a retry of the
   * same message (same `eventId`) or a second handling of the same delivery is answered
   * `duplicate`, leaving one transcript line and one run, which is started if its turn came
   * while nobody started it.
   */
  async handleMessage(
    sessionKey: string,
    input: MessageInput,
    deliveryId?: string,
    data?: readonly string[],
  ): Promise<MessageResult> {
    const { sessions, config, hooks } = this.deps;
    this.deps.logger.debug({ sessionKey, mode: input.mode }, 'message received');
    const receivedAt = new Date().toISOString();
    metrics.eventsIngested.inc({ kind: 'message' });
    const command = input.text.trim().toLowerCase();
    const queue = parseQueueCommand(command);
    if (command === '/stop' || command === '/new' || command === '/reset' || queue) {
      if (input.eventId !== undefined && !(await this.firstSighting(`session:${sessionKey}`, input.eventId)))
        return this.duplicate(sessionKey, undefined);
      if (command === '/stop') return this.stop(sessionKey);
      if (command === '/new' || command === '/reset')
        return this.reset(sessionKey, command.slice(1) as 'new' | 'reset');
      if (queue === 'invalid') throw new Error(`/queue takes one of: ${QUEUE_ARGUMENTS.join(', ')}`);
      if (queue) return this.setQueueMode(sessionKey, queue.mode);
    }

    const messageId =
      input.eventId !== undefined
        ? `event:${input.eventId}`
        : deliveryId !== undefined
          ? `delivery:${deliveryId}`
          : undefined;
    const runId =
      deliveryId !== undefined ? derivedRunId('session-message', sessionKey, deliveryId) : randomUUID();
    const windowMs = config.dedupeWindowSeconds * 1000;
    // Seen already: nothing more to prepare (the admission below is what decides).
    if (messageId !== undefined && (await sessions.seen(sessionKey, messageId, windowMs)))
      return this.duplicate(sessionKey, runId);

    // The first message binds the session to its agent; a later one naming another is refused.
    const agentId = await sessions.bindAgent(sessionKey, input.agentId ?? config.agentId);
    if (input.agentId !== undefined && input.agentId !== agentId) {
      return { sessionKey, queued: false, refused: { code: 'agent_conflict', agentId } };
    }
    const mode = input.mode ?? (await sessions.mode(sessionKey)) ?? config.defaultMode;
    // A followup message to a full lane is refused before anything of it is written.
    if (mode === 'followup' && (await sessions.followupFull(sessionKey, config.followupCap))) {
      return this.laneFull(sessionKey, input);
    }
    await hooks?.emit('message_received', {
      sessionKey,
      text: input.text,
      ...(input.eventId ? { eventId: input.eventId } : {}),
    });
    const message: LaneMessage = {
      text: input.text,
      receivedAt,
      ...(input.eventId ? { eventId: input.eventId } : {}),
      ...(input.model !== undefined ? { model: input.model } : {}),
      ...(input.thinking !== undefined ? { thinking: input.thinking } : {}),
      ...(input.secrets?.length ? { secrets: input.secrets } : {}),
    };
    const call: RunCall = {
      agentId,
      ...(input.model !== undefined ? { model: input.model } : {}),
      ...(input.thinking !== undefined ? { thinking: input.thinking } : {}),
      ...(input.secrets?.length ? { secrets: input.secrets } : {}),
      ...(data?.length ? { data } : {}),
    };
    // The run is stored before the lane sees it, so a lane never points at a run that does not exist.
    await this.prepareRun(sessionKey, input.text, input.metadata, runId, call, input.text);
    const admitted = await sessions.admit(sessionKey, {
      mode,
      runId,
      // A collected message takes its data to the merged run; the transcript line never holds it
      // (nor the environment: a steered one's event is there already, as its own entry).
      message: mode === 'collect' && data?.length ? { ...message, data } : message,
      collectCap: config.collectCap,
      drop: config.collectDrop,
      envCap: config.environmentCap,
      followupCap: config.followupCap,
      ...(messageId !== undefined ? { once: { id: messageId, windowMs } } : {}),
      ...(input.eventId === undefined && (config.contentDedupeMs ?? 0) > 0
        ? { sameContent: { id: contentIdOf(input, mode), windowMs: config.contentDedupeMs! } }
        : {}),
      line: { type: 'message', role: 'user', ...message },
    });
    switch (admitted.kind) {
      case 'duplicate':
        return this.duplicate(sessionKey, runId);
      case 'start':
        await this.deps.runs.start(runId);
        return { sessionKey, runId, queued: false };
      case 'queued':
        return { sessionKey, runId, queued: true, position: admitted.position };
      case 'full':
        // Another message took the lane's last place after the check above: this one's run goes;
        // the admission wrote nothing of it (no transcript line, no record of its id).
        await this.deps.store.delete(runId);
        return this.laneFull(sessionKey, input);
      case 'interrupt':
        await this.cancel(admitted.cancel, 'interrupted by a newer message');
        await this.startLaneRun(sessionKey, runId);
        return { sessionKey, runId, queued: false };
      case 'collected':
        await this.deps.store.delete(runId);
        return { sessionKey, queued: true, position: admitted.position };
      case 'dropped':
        await this.deps.store.delete(runId);
        return { sessionKey, queued: false, dropped: true };
      case 'steered':
        await this.deps.store.delete(runId);
        return { sessionKey, runId: admitted.runId, queued: false };
    }
  }

  /**
   * The answer to a followup message its lane has no room for. Its event id is forgotten, so the
   * same message sent again once a run has started is taken, not ignored as a duplicate.
   */
  private async laneFull(sessionKey: string, input: MessageInput): Promise<MessageResult> {
    if (input.eventId !== undefined) {
      await this.deps.redis.del(dedupeKey(this.deps.prefix, `session:${sessionKey}`, input.eventId));
    }
    return { sessionKey, queued: false, refused: { code: 'lane_full', limit: this.deps.config.followupCap } };
  }

  /**
   * The answer to a message admitted before, given `runId`, the run this handling prepared. A run
   * of this id that started, or that its lane holds, is the message's own (the same delivery
   * handled again) and is answered; one its lane holds unstarted is started first (the first
   * handling died between the admission and the start). One no lane holds was prepared for
   * nothing (another delivery of the message was admitted, or the message was collected, steered
   * or dropped) and is deleted.
   */
  private async duplicate(sessionKey: string, runId: string | undefined): Promise<MessageResult> {
    metrics.eventsDeduplicated.inc({ kind: 'message' });
    const answer = { sessionKey, queued: false, duplicate: true as const };
    const status = runId === undefined ? null : await this.deps.store.status(runId);
    if (runId === undefined || status === null) return answer;
    if (status !== 'queued') return { ...answer, runId };
    // Read in the order the lane moves a run (queue, then running, then settled), so a run the lane
    // moves on meanwhile is still seen held.
    const { sessions } = this.deps;
    const position = await sessions.position(sessionKey, runId);
    if (position !== null) return { ...answer, runId, queued: true, position };
    if ((await sessions.running(sessionKey)) === runId) {
      // The first handling died after admitting it: it may not have put the lane among the busy
      // ones either, and then the lane sweep would never see it if the run's own follow-up is cut
      // off too (found by `npm run chaos`: a lane left running a settled run).
      await sessions.enterBusy(sessionKey);
      await this.deps.runs.start(runId);
      return { ...answer, runId };
    }
    if ((await this.deps.store.status(runId)) !== 'queued') return { ...answer, runId };
    await this.deps.store.delete(runId);
    return answer;
  }

  /**
   * A session run settled: write its reply and transcript entries (once), then move the lane on.
   * The reply is written before the run is marked replied, and written once however many passes
   * come (the root job handed out again, the lane sweep): a pass that dies half way leaves the
   * reply to the next one instead of losing it.
   */
  async onRunSettled(runId: string): Promise<void> {
    const { store, sessions, config } = this.deps;
    const sessionKey = await store.sessionOf(runId);
    if (!sessionKey) return;
    if (!(await store.sessionReplied(runId))) {
      // Another pass is writing this reply (its message_sending hooks run once): it moves the lane on.
      if (!(await sessions.leaseReply(sessionKey, runId, REPLY_LEASE_MS))) return;
      try {
        const id = `reply:${runId}`;
        const windowMs = config.dedupeWindowSeconds * 1000;
        const doc = (await sessions.seen(sessionKey, id, windowMs)) ? null : await store.document(runId);
        // The reply is the run's output: a sink's output kept as a blob is read back for it.
        if (doc)
          await this.writeReply(
            sessionKey,
            await store.blobs.expandDocument(doc, { nodes: false }),
            id,
            windowMs,
          );
        await store.markSessionReplied(runId);
      } finally {
        await sessions.releaseReply(sessionKey, runId);
      }
    }
    await this.advance(sessionKey, runId);
    // The lines the run added (its message, its reply), once the lane moved on: the next run does
    // not wait for the archive.
    await this.deps.archive?.archiveTranscript(sessions, sessionKey);
  }

  /**
   * Starts the run the lane moved on to. The runs still waiting behind it are kept (their keys'
   * TTL renewed, never shortened) for as long as it may last: it may wait weeks (a signal, an
   * approval, a budget decision, a time), longer than the TTL they were created with has left.
   * Renewed at every start, a run waiting behind several long ones outlives each of them.
   */
  private async startLaneRun(sessionKey: string, runId: string): Promise<void> {
    await this.deps.runs.start(runId);
    await this.deps.store.keepQueued(await this.deps.sessions.queuedRuns(sessionKey));
  }

  /** Moves the lane on from `finished` (a run id, or `collect`). */
  async advance(sessionKey: string, finished: string): Promise<void> {
    const { sessions, config } = this.deps;
    for (let current = finished; ;) {
      const next = await sessions.advance(sessionKey, current, config.collectDebounceMs);
      switch (next.kind) {
        case 'run': {
          const waited = await this.deps.store.document(next.runId);
          if (waited) metrics.laneWait.observe((Date.now() - Date.parse(waited.createdAt)) / 1000);
          await this.startLaneRun(sessionKey, next.runId);
          return;
        }
        case 'collect-wait':
          await this.deps.senseQueue.add(
            SENSE_JOB.laneAdvance,
            { sessionKey, finished: 'collect' },
            {
              delay: Math.max(0, next.dueAt - Date.now()),
              jobId: `lane-${sessionKey}-${next.dueAt}`.replaceAll(':', '_'),
              removeOnComplete: true,
              removeOnFail: { age: 86_400 },
            },
          );
          return;
        case 'collect': {
          const messages = await sessions.collected(sessionKey, next.count);
          const runId = await this.prepareRun(
            sessionKey,
            collectedText(messages),
            undefined,
            randomUUID(),
            await this.collectedCall(sessionKey, messages),
          );
          if (await sessions.commitCollect(sessionKey, runId, next.count)) {
            await this.startLaneRun(sessionKey, runId);
            return;
          }
          await this.deps.store.delete(runId);
          current = 'collect';
          continue;
        }
        default:
          return;
      }
    }
  }

  /**
   * Keeps lanes moving whose run settled while nobody moved them on (a process died). Each session
   * is on its own: one whose lane cannot move is freed (see `laneFailed`) and the sweep goes on.
   * Returns how many sessions failed.
   */
  async sweep(): Promise<number> {
    let failed = 0;
    for (const sessionKey of await this.deps.sessions.busySessions()) {
      try {
        await this.sweepOne(sessionKey);
      } catch (err) {
        failed++;
        await this.laneFailed(sessionKey, err);
      }
    }
    return failed;
  }

  private async sweepOne(sessionKey: string): Promise<void> {
    const running = await this.deps.sessions.running(sessionKey);
    if (running === null) {
      await this.advance(sessionKey, '');
    } else if (running === 'collect') {
      await this.advance(sessionKey, 'collect');
    } else if ((await this.deps.store.status(running)) === null) {
      // The run is gone (expired or never stored): free the lane from it.
      await this.advance(sessionKey, running);
    } else if (await this.deps.store.isSettled(running)) {
      await this.onRunSettled(running);
    }
  }

  /**
   * A session's lane could not move on: it is logged, the lane is emptied (its runs cancelled, as
   * by /stop) and the transcript says so, so the session takes messages again. When even that
   * fails (its keys hold what no script can read), the session leaves the busy set, so the sweep
   * stops trying it. Nothing here throws.
   */
  private async laneFailed(sessionKey: string, err: unknown): Promise<void> {
    const { sessions, logger } = this.deps;
    const message = err instanceof Error ? err.message : String(err);
    logger.error({ sessionKey, err: message }, 'session lane could not move on; freeing it');
    metrics.laneFailures.inc();
    const errorOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));
    let held: { running: string | null; queued: string[] } = { running: null, queued: [] };
    try {
      held = await sessions.stop(sessionKey);
    } catch (stopErr) {
      logger.error(
        { sessionKey, err: errorOf(stopErr) },
        'session lane could not be freed; leaving the busy set',
      );
      await sessions.forgetBusy(sessionKey).catch(() => undefined);
    }
    // The runs the lane held end, each on its own: one that cannot be cancelled is logged.
    const cancelled: string[] = [];
    for (const [runId, started] of [
      ...(held.running ? [[held.running, true] as const] : []),
      ...held.queued.map((id) => [id, false] as const),
    ]) {
      try {
        if (started) await this.cancel(runId, 'the session lane failed');
        else await this.deps.runs.cancelUnstarted(runId, 'the session lane failed');
        cancelled.push(runId);
      } catch (cancelErr) {
        logger.error({ sessionKey, runId, err: errorOf(cancelErr) }, 'run of a failed lane not cancelled');
      }
    }
    try {
      await sessions.appendTranscript(sessionKey, {
        type: 'error',
        code: 'lane_failed',
        message: `the lane could not move on and was freed: ${message}`,
        cancelled,
        at: new Date().toISOString(),
      });
    } catch (lineErr) {
      logger.error(
        { sessionKey, err: errorOf(lineErr) },
        'session lane failure could not be written to its transcript',
      );
    }
  }

  /**
   * The plan loop's environment check (run every 1.5 s): for each session run whose session
   * environment moved since its plan was made, a planned run is handed back to the planner with
   * what changed; an agent run gets it as steering for its next turn. Nothing happens when the
   * version did not move.
   */
  async checkEnvironment(): Promise<number> {
    let changed = 0;
    for (const sessionKey of await this.deps.sessions.busySessions()) {
      // One session whose state cannot be read does not stop the check of the others.
      try {
        if (await this.checkOne(sessionKey)) changed++;
      } catch (err) {
        this.deps.logger.error(
          { sessionKey, err: err instanceof Error ? err.message : String(err) },
          'session environment check failed',
        );
      }
    }
    return changed;
  }

  private async checkOne(sessionKey: string): Promise<boolean> {
    const runId = await this.deps.sessions.running(sessionKey);
    if (!runId || runId === 'collect' || (await this.deps.store.status(runId)) !== 'running') return false;
    const env = await this.deps.sessions.environment(sessionKey);
    // One script records the version, appends the event and replans or steers: never half done.
    const recent = env.events.map(describeEnvironmentEvent);
    return this.deps.store.environmentChanged(runId, env.version, recent);
  }

  /** Event-id deduplication within the window: true the first time an id is seen. */
  async firstSighting(source: string, eventId: string): Promise<boolean> {
    const key = dedupeKey(this.deps.prefix, source, eventId);
    return (await this.deps.redis.set(key, '1', 'EX', this.deps.config.dedupeWindowSeconds, 'NX')) === 'OK';
  }

  private async stop(sessionKey: string): Promise<MessageResult> {
    const { running, queued } = await this.deps.sessions.stop(sessionKey);
    if (running) await this.cancel(running, 'stopped by /stop');
    for (const runId of queued) await this.deps.runs.cancelUnstarted(runId, 'stopped by /stop');
    const cancelled = [...(running ? [running] : []), ...queued];
    await this.deps.sessions.appendTranscript(sessionKey, {
      type: 'command',
      command: 'stop',
      cancelled,
      at: new Date().toISOString(),
    });
    await this.deps.hooks?.emit('command:stop', { sessionKey, cancelled });
    return { sessionKey, queued: false, command: 'stop' };
  }

  /** `/queue`: the mode later messages get when they name none (null: the deployment's). */
  private async setQueueMode(sessionKey: string, mode: LaneMode | null): Promise<MessageResult> {
    await this.deps.sessions.setMode(sessionKey, mode, {
      type: 'command',
      command: 'queue',
      mode,
      at: new Date().toISOString(),
    });
    await this.deps.hooks?.emit('command:queue', { sessionKey, mode });
    return { sessionKey, queued: false, command: 'queue', mode: mode ?? this.deps.config.defaultMode };
  }

  private async reset(sessionKey: string, command: 'new' | 'reset'): Promise<MessageResult> {
    const view = await this.deps.sessions.view(sessionKey);
    if (view) await this.deps.hooks?.emit('session_end', { sessionKey, contextId: view.contextId });
    const contextId = await this.deps.sessions.reset(sessionKey, {
      type: 'command',
      command,
      at: new Date().toISOString(),
    });
    await this.deps.hooks?.emit(command === 'new' ? 'command:new' : 'command:reset', { sessionKey });
    await this.deps.hooks?.emit('session_start', { sessionKey, contextId });
    return { sessionKey, queued: false, command };
  }

  private async cancel(runId: string, reason: string): Promise<void> {
    const now = new Date().toISOString();
    if (await this.deps.store.decideError(runId, cancelledError(reason), now)) {
      await wakeParkedNodes(this.deps.store, this.deps.queues, runId);
    }
  }

  /** A merged collect run's call: the session's agent, the newest model and thinking its messages asked for. */
  private async collectedCall(sessionKey: string, messages: readonly LaneMessage[]): Promise<RunCall> {
    const agentId = (await this.deps.sessions.agent(sessionKey)) ?? this.deps.config.agentId;
    const model = messages.findLast((m) => m.model !== undefined)?.model;
    const thinking = Thinking.safeParse(messages.findLast((m) => m.thinking !== undefined)?.thinking);
    // Each message's caller granted its secrets; the merged run answers them all.
    const secrets = [...new Set(messages.flatMap((m) => m.secrets ?? []))];
    const data = messages.flatMap((m) => m.data ?? []);
    return {
      agentId,
      ...(model !== undefined ? { model } : {}),
      ...(thinking.success && thinking.data !== undefined ? { thinking: thinking.data } : {}),
      ...(secrets.length ? { secrets } : {}),
      ...(data.length ? { data } : {}),
    };
  }

  /**
   * Stores (without starting) the run `runId` that will answer `text` in this session's context; a
   * run with that id stored before is kept as it is. `newest`: the message the run answers, when
   * its transcript line is not written yet (it is written when the message is admitted); without
   * it, the newest message line is taken as that message.
   */
  private async prepareRun(
    sessionKey: string,
    text: string,
    metadata: Record<string, unknown> | undefined,
    runId: string,
    call: RunCall,
    newest?: string,
  ): Promise<string> {
    const { config, sessions, hooks } = this.deps;
    const { agentId } = call;
    const snapshot = await sessions.bootstrap(sessionKey, () =>
      readWorkspace(config.workspaceDir, agentId, BOOTSTRAP_FILES, config.workspaceFileChars),
    );
    if (snapshot.fresh) {
      const view = await sessions.view(sessionKey);
      await hooks?.emit('session_start', { sessionKey, contextId: view?.contextId ?? 1 });
    }
    const extra: string[] = await this.history(sessionKey, newest);
    // A planner is told the outside data among its runtime overrides, still delimited.
    if (config.runMode !== 'loop' && call.data?.length)
      extra.push([UNTRUSTED_DATA_NOTE, ...call.data].join('\n'));
    if (hooks?.has('before_agent_start')) {
      const ctx = { runId, agentId, task: text, sessionKey };
      const { results } = await hooks.run('before_agent_start', ctx, (c) => c);
      for (const r of results) if (r.context) extra.push(r.context);
    }
    // A session run belongs to its session's tenant.
    const { tenant } = unscopeName(sessionKey);
    // A loop-mode run's agent gets the agent's prompt; a planner reads the workspace itself and is
    // told the conversation and hook context as runtime overrides.
    const prompt =
      config.runMode === 'loop'
        ? await agentPrompt(this.promptDeps, {
            agentId,
            tenant,
            runId,
            sessionKey,
            files: snapshot.files,
            overrides: extra,
          })
        : undefined;
    if (!prompt) extra.push(...(await promptBuildContext(hooks, agentId, sessionKey)));
    // Messages collected while the lane was busy (or a long hook context) can together pass what
    // a run request holds: they are cut to fit, with a marker, rather than failing the lane.
    const request = RunRequest.parse({
      task: fitText(text, MAX_TASK_CHARS),
      mode: config.runMode,
      agentId,
      ...(call.model !== undefined ? { model: call.model } : {}),
      ...(call.thinking !== undefined ? { thinking: call.thinking } : {}),
      ...(call.secrets?.length ? { secrets: [...call.secrets] } : {}),
      ...(!prompt && extra.length ? { overrides: fitText(extra.join('\n\n'), MAX_TASK_CHARS) } : {}),
      metadata: { ...metadata, sessionKey },
    });
    await this.deps.runs.submit(request, undefined, {
      tenant,
      sessionKey,
      start: false,
      runId,
      ...(prompt ? { system: prompt.system, skills: prompt.skills } : {}),
      // An agent reads the outside data before its first turn, as a `session_environment` result.
      ...(config.runMode === 'loop' && call.data?.length ? { steering: call.data } : {}),
    });
    return runId;
  }

  /**
   * What the run sees of the current context: the summary of its earlier conversation (after a
   * compaction) and the messages after it, oldest first, leaving out the message the run answers:
   * `newest`, whose line is not written yet, or else the newest message line. When that history
   * has grown past the compaction limits, its older turns are compacted first.
   */
  private async history(sessionKey: string, newest?: string): Promise<string[]> {
    const read = await this.deps.sessions.history(sessionKey);
    const state =
      newest === undefined
        ? {
            summary: read.compaction?.summary ?? null,
            turns: read.messages.slice(0, -1),
            newest: read.messages.at(-1),
            start: read.start,
            length: read.length,
          }
        : {
            summary: read.compaction?.summary ?? null,
            turns: read.messages,
            // Where its line would go if it were written now.
            newest: { index: read.length, role: 'user', text: newest },
            start: read.start,
            length: read.length + 1,
          };
    const { compactTokens: tokens, compactLines: lines } = this.deps.config;
    const plan = planCompaction(state, { tokens, lines });
    if (!plan) return historyParts(state.summary, state.turns);
    return historyParts(await this.compact(sessionKey, read, plan), plan.keep);
  }

  /**
   * Folds the plan's older turns and the previous summary into a new summary, by the model when
   * one is configured, else (or when the model call fails) by truncation, and records it: a
   * `compaction` transcript line and the session's latest compaction. Returns the summary. When
   * another compaction or a /new was recorded meanwhile, nothing is written; the run still sees
   * this summary, made from the same turns.
   */
  private async compact(sessionKey: string, read: HistoryWindow, plan: CompactionPlan): Promise<string> {
    const { config, summarize, logger } = this.deps;
    const previous = read.compaction?.summary ?? null;
    const maxChars = summaryCharsOf({ tokens: config.compactTokens });
    const maxInputChars = summaryInputCharsOf({ tokens: config.compactTokens });
    let summary: string | null = null;
    let error: string | undefined;
    if (summarize) {
      try {
        const text = cappedSummary(
          await summarize(
            summaryPrompt(previous, plan.fold, { maxChars, maxInputChars }),
            AbortSignal.timeout(config.compactTimeoutMs),
          ),
          maxChars,
        );
        if (text === '') throw new Error('the model answered an empty summary');
        summary = text;
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
        logger.warn({ sessionKey, err: error }, 'compaction summary failed; truncating instead');
      }
    }
    const by = summary === null ? 'truncation' : 'model';
    summary ??= truncatedSummary(previous, plan.fold, maxChars);
    const covers = coversOf(read.compaction?.covers, read.contextFrom, plan);
    const entry = {
      type: 'compaction',
      summary,
      covers,
      tokens: { before: plan.tokensBefore, after: historyTokens(summary, plan.keep) },
      by,
      ...(error === undefined ? {} : { error }),
      at: new Date().toISOString(),
    };
    const recorded = await this.deps.sessions.compact(sessionKey, read, { summary, covers }, entry);
    logger.info({ sessionKey, by, covers, recorded }, 'session history compacted');
    return summary;
  }

  private async writeReply(
    sessionKey: string,
    doc: RunDocument,
    id: string,
    windowMs: number,
  ): Promise<void> {
    const events = await this.deps.store.events(doc.runId, 0, 10_000);
    const reply = replyOf(doc, events);
    const entries: unknown[] = [...reply.toolEntries];
    let text = reply.text;
    if (text !== null && text.trim() !== 'NO_REPLY' && this.deps.hooks?.has('message_sending')) {
      const { ctx, results } = await this.deps.hooks.run(
        'message_sending',
        { sessionKey, runId: doc.runId, text },
        (c, r) => (r.text !== undefined ? { ...c, text: r.text } : c),
        (r) => r.cancel === true,
      );
      text = results.some((r) => r.cancel) ? null : ctx.text;
    }
    // NO_REPLY is the agent saying nothing needs saying: no message, no message_sending.
    if (text !== null && text.trim() !== 'NO_REPLY') {
      entries.push({
        type: 'message',
        role: 'assistant',
        text,
        runId: doc.runId,
        tools: reply.toolSummary,
        ...(reply.reasoning ? { reasoning: reply.reasoning } : {}),
        at: new Date().toISOString(),
      });
    }
    entries.push({ type: 'run', runId: doc.runId, status: doc.status, usage: doc.usage, at: doc.finishedAt });
    if (!(await this.deps.sessions.appendOnce(sessionKey, id, windowMs, ...entries))) return;
    await this.deps.hooks?.emit('agent_end', {
      runId: doc.runId,
      status: doc.status,
      agentId: doc.agentId,
      sessionKey,
    });
  }
}

/**
 * One line for an environment entry: a steering message (the user's own words), or a source
 * event, whose payload is outside data and reaches a model only as a delimited, untrusted block.
 */
export function describeEnvironmentEvent(e: unknown): string {
  const entry = e as { text?: string; source?: string; type?: string; payload?: unknown };
  if (typeof entry.text === 'string') return entry.text;
  return untrustedData({ source: entry.source ?? 'event', type: entry.type ?? 'event' }, entry.payload);
}

/**
 * `text` cut to at most `maxChars` characters, the marker `…[truncated N chars]` included, so the
 * result always fits. Pure.
 */
export function fitText(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const marker = (omitted: number): string => `\n…[truncated ${omitted} chars]`;
  // The marker is longest for the most omitted characters; sizing the cut for it always fits.
  let keep = Math.max(0, maxChars - marker(text.length).length);
  // Never keep half of a surrogate pair.
  if (keep > 0 && /[\uD800-\uDBFF]/.test(text.charAt(keep - 1))) keep -= 1;
  return `${text.slice(0, keep)}${marker(text.length - keep)}`;
}

/** The text of a run made of messages collected while the lane was busy. */
export function collectedText(messages: readonly LaneMessage[]): string {
  const count = messages.reduce((n, m) => n + (m.summarized ?? 1), 0);
  return [
    `[${count} messages arrived while you were busy]`,
    ...messages.map(
      (m, i) => `${i + 1}. ${m.summarized && m.summarized > 1 ? `(${m.summarized} merged) ` : ''}${m.text}`,
    ),
  ].join('\n');
}

export const contentHash = (value: unknown): string =>
  createHash('sha256').update(JSON.stringify(value)).digest('hex');
