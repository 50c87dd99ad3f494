/**
 * A Tetraloop run as AG-UI events (docs/interop.md#ag-ui): the run's own events (docs/api.md) go
 * in one by one, and out come AG-UI events in the order AG-UI's client checks — a text message
 * is opened before its deltas and closed before a tool call, every step is closed before the run
 * ends. Pure: the router reads the run's stream and writes what this answers.
 *
 * | Tetraloop                                  | AG-UI                                            |
 * |--------------------------------------------|--------------------------------------------------|
 * | following starts                           | RUN_STARTED, STATE_SNAPSHOT                      |
 * | `node.started` / a node's end              | STEP_STARTED / STEP_FINISHED, STATE_DELTA        |
 * | `assistant.delta`                          | TEXT_MESSAGE_START (first), TEXT_MESSAGE_CONTENT |
 * | an agent's `tool.start`                    | TOOL_CALL_START, TOOL_CALL_ARGS, TOOL_CALL_END   |
 * | `node.iteration` (an agent's turn)         | TOOL_CALL_RESULT per tool result                 |
 * | `signal.awaited` (approval, budget, wait)  | RUN_FINISHED with an interrupt outcome           |
 * | `run.finished`                             | RUN_FINISHED (cancelled: that outcome), or RUN_ERROR |
 */
import {
  EventType,
  type AGUIEvent,
  type Interrupt,
  type JsonPatchOperation,
  type TokenUsage,
} from '@ag-ui/core';
import type { RunError, RunEvent, RunStatus } from '@tetraloop/core/domain';

/** The key of AG-UI's state under which Tetraloop shows the run; the client's own keys stay beside it. */
export const STATE_KEY = 'tetraloop';

/** What a Tetraloop run shows of itself in AG-UI's state (`state.tetraloop`). */
export interface RunState {
  readonly runId: string;
  readonly status: RunStatus;
  /** Each node's status, by node id. */
  readonly nodes: Readonly<Record<string, string>>;
}

/** Who the AG-UI run is: the thread and run ids the client gave, and the Tetraloop run it follows. */
export interface AguiRunIds {
  readonly threadId: string;
  readonly runId: string;
  readonly tetraloopRunId: string;
}

/** What an interrupt asks for, by the kind of wait behind it. */
export type InterruptKind = 'tool_approval' | 'budget' | 'signal';

/**
 * An interrupt's id names the run, the place in its stream the AG-UI run ended (a resumed stream
 * goes on after it) and the signal that answers it: `<runId>:<seq>:<signal>`.
 */
export const interruptId = (runId: string, seq: number, signal: string): string =>
  `${runId}:${seq}:${signal}`;

export interface InterruptRef {
  readonly runId: string;
  readonly seq: number;
  readonly signal: string;
  readonly kind: InterruptKind;
}

const INTERRUPT_ID = /^([0-9a-f-]{36}):(\d{1,15}):([A-Za-z0-9_.-]{1,256})$/;

/** The run, place and signal an interrupt id names; undefined for an id Tetraloop did not make. */
export function parseInterruptId(id: string): InterruptRef | undefined {
  const m = INTERRUPT_ID.exec(id);
  if (!m) return undefined;
  const signal = m[3]!;
  return { runId: m[1]!, seq: Number(m[2]), signal, kind: kindOfSignal(signal) };
}

/** Approvals' signals are `approve.<nodeId>.<nonce>`, budget decisions' `budget.<nonce>`. */
const kindOfSignal = (signal: string): InterruptKind =>
  signal.startsWith('approve.') ? 'tool_approval' : signal.startsWith('budget.') ? 'budget' : 'signal';

/** The answer each kind of interrupt takes (`resume[].payload`), for a client to build a form from. */
const RESPONSE_SCHEMAS: Readonly<Record<InterruptKind, Record<string, unknown> | undefined>> = {
  tool_approval: {
    type: 'object',
    properties: { approved: { type: 'boolean' } },
    required: ['approved'],
  },
  budget: {
    type: 'object',
    description: 'exactly one of costUsd (a higher budget, USD) and stop (true)',
    properties: { costUsd: { type: 'number', exclusiveMinimum: 0 }, stop: { const: true } },
  },
  signal: undefined,
};

interface AwaitedData {
  signal: string;
  until?: string;
  approval?: { tool: string; reason: string };
  budget?: { costUsd: number; spentUsd: number };
}

interface TurnData {
  turn?: { toolResults?: { tool_call_id: string; content: string }[] };
}

/** A node's events that end it, and the status each leaves. */
const NODE_ENDS: Readonly<Record<string, string>> = {
  'node.succeeded': 'succeeded',
  'node.failed': 'failed',
  'node.skipped': 'skipped',
  'node.cancelled': 'cancelled',
  'node.expired': 'expired',
};

/** RFC 6901: `~` and `/` inside a reference token. */
const pointerToken = (text: string): string => text.replaceAll('~', '~0').replaceAll('/', '~1');

/** Where a node's status is in AG-UI's state. */
const nodePath = (nodeId: string): string => `/${STATE_KEY}/nodes/${pointerToken(nodeId)}`;

/** Carries what one AG-UI run has opened, so that each thing is closed once and in order. */
export class AguiTranslator {
  /** The text message being streamed, and the node whose model writes it. */
  private message: { id: string; nodeId: string | undefined } | undefined;
  private readonly steps = new Set<string>();
  /** Each node's latest tool call: the one an approval of that node holds. */
  private readonly lastCall = new Map<string, string>();
  /** Waits begun and not (yet seen) answered: told as interrupts once the stream has caught up. */
  private readonly awaited = new Map<string, { nodeId: string | undefined; data: AwaitedData }>();
  private readonly usage = new Map<string, TokenUsage>();
  private ended = false;

  constructor(
    private readonly ids: AguiRunIds,
    /** The place in the run's stream following starts after; then the last event's. */
    private seq: number,
  ) {}

  /** Whether RUN_FINISHED or RUN_ERROR was said: nothing follows it. */
  get over(): boolean {
    return this.ended;
  }

  /**
   * RUN_STARTED, the state (the client's, with the run under `tetraloop`) and a step for each node
   * already running — a resumed run's, whose steps the interrupt closed.
   */
  start(clientState: Readonly<Record<string, unknown>>, run: RunState): AGUIEvent[] {
    const { threadId, runId } = this.ids;
    const out: AGUIEvent[] = [
      { type: EventType.RUN_STARTED, threadId, runId },
      { type: EventType.STATE_SNAPSHOT, snapshot: { ...clientState, [STATE_KEY]: run } },
    ];
    for (const [nodeId, status] of Object.entries(run.nodes)) {
      if (status === 'running' || status === 'waiting') out.push(...this.openStep(nodeId));
    }
    return out;
  }

  /** The AG-UI events one event of the run makes; `final` for the run's last (`run.finished`). */
  next(e: RunEvent, final: boolean): AGUIEvent[] {
    if (this.ended) return [];
    this.seq = e.seq;
    const { nodeId } = e;
    switch (e.type) {
      case 'node.started':
        return nodeId === undefined ? [] : [...this.openStep(nodeId), this.nodeStatus(nodeId, 'running')];
      case 'assistant.delta':
        return this.text(nodeId, (e.data as { text?: string } | undefined)?.text ?? '', e.seq);
      case 'tool.start':
        return this.toolCall(nodeId, e.data as { tool?: string; callId?: string; args?: string } | undefined);
      case 'node.iteration':
        return this.toolResults(nodeId, e.data as TurnData | undefined);
      case 'signal.awaited':
        this.awaited.set((e.data as AwaitedData).signal, { nodeId, data: e.data as AwaitedData });
        return [];
      case 'signal.received':
        this.awaited.delete((e.data as { name?: string } | undefined)?.name ?? '');
        return [];
      case 'usage':
        this.addUsage(e.data as { model?: string; promptTokens?: number; completionTokens?: number });
        return [];
      case 'run.finished': {
        if (!final) return [];
        const { status, error } = (e.data ?? {}) as { status?: RunStatus; error?: RunError | null };
        return this.finish(status ?? 'failed', error ?? null);
      }
      default: {
        const ended = NODE_ENDS[e.type];
        if (ended === undefined || nodeId === undefined) return [];
        return [...this.closeText(nodeId), ...this.closeStep(nodeId), this.nodeStatus(nodeId, ended)];
      }
    }
  }

  /**
   * Once the stream has caught up: a wait still unanswered ends the AG-UI run with an interrupt
   * outcome (the Tetraloop run goes on waiting; the client's next request, with `resume`, answers
   * it). Nothing while no wait is open.
   */
  interrupt(): AGUIEvent[] {
    if (this.ended || this.awaited.size === 0) return [];
    const interrupts: Interrupt[] = [];
    const waiting: JsonPatchOperation[] = [];
    for (const [signal, { nodeId, data }] of this.awaited) {
      const kind = kindOfSignal(signal);
      const toolCallId = kind === 'tool_approval' && nodeId ? this.lastCall.get(nodeId) : undefined;
      const responseSchema = RESPONSE_SCHEMAS[kind];
      interrupts.push({
        // The place the stream stopped: the resumed stream goes on after it, repeating nothing.
        id: interruptId(this.ids.tetraloopRunId, this.seq, signal),
        reason: kind,
        message: messageOf(kind, data),
        ...(toolCallId ? { toolCallId } : {}),
        ...(responseSchema ? { responseSchema } : {}),
        ...(data.until ? { expiresAt: data.until } : {}),
        metadata: { [STATE_KEY]: { runId: this.ids.tetraloopRunId, signal, ...(nodeId ? { nodeId } : {}) } },
      });
      if (nodeId) waiting.push({ op: 'add', path: nodePath(nodeId), value: 'waiting' });
    }
    const out = [
      ...this.closeAll(),
      ...(waiting.length ? [{ type: EventType.STATE_DELTA, delta: waiting } as const] : []),
    ];
    this.ended = true;
    const { threadId, runId } = this.ids;
    return [
      ...out,
      {
        type: EventType.RUN_FINISHED,
        threadId,
        runId,
        outcome: { type: 'interrupt', interrupts },
        ...this.usageOf(),
      },
    ];
  }

  /** The end of a run whose events were all told before (nothing was left to follow). */
  settled(status: RunStatus, error: RunError | null): AGUIEvent[] {
    return this.ended ? [] : this.finish(status, error);
  }

  private finish(status: RunStatus, error: RunError | null): AGUIEvent[] {
    this.awaited.clear();
    const out: AGUIEvent[] = [
      ...this.closeAll(),
      { type: EventType.STATE_DELTA, delta: [{ op: 'add', path: `/${STATE_KEY}/status`, value: status }] },
    ];
    this.ended = true;
    const { threadId, runId } = this.ids;
    switch (status) {
      case 'succeeded':
        return [...out, { type: EventType.RUN_FINISHED, threadId, runId, ...this.usageOf() }];
      case 'cancelled':
        return [
          ...out,
          {
            type: EventType.RUN_FINISHED,
            threadId,
            runId,
            outcome: { type: 'cancelled' },
            ...this.usageOf(),
          },
        ];
      // A final run.finished always carries a settled status: queued and running cannot come with it.
      case 'failed':
      case 'timed_out':
      case 'queued':
      case 'running':
        return [
          ...out,
          {
            type: EventType.RUN_ERROR,
            message: error?.message ?? `the run ended ${status}`,
            code: error?.code ?? status,
            ...this.usageOf(),
          },
        ];
    }
  }

  private text(nodeId: string | undefined, text: string, seq: number): AGUIEvent[] {
    if (!text) return [];
    const out: AGUIEvent[] = [];
    if (this.message && this.message.nodeId !== nodeId) out.push(...this.closeText());
    if (!this.message) {
      // Named by the run and the place of its first delta: unique, and the same on every replay.
      this.message = { id: `${this.ids.tetraloopRunId}:${seq}`, nodeId };
      out.push({ type: EventType.TEXT_MESSAGE_START, messageId: this.message.id, role: 'assistant' });
    }
    out.push({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: this.message.id, delta: text });
    return out;
  }

  private toolCall(
    nodeId: string | undefined,
    data: { tool?: string; callId?: string; args?: string } | undefined,
  ): AGUIEvent[] {
    // A graph's `tool` node says `tool.start` without data: it is a step, not a model's tool call.
    if (!data?.callId || !data.tool) return [];
    const parent = this.message?.id;
    const out: AGUIEvent[] = [...this.closeText()];
    const toolCallId = data.callId;
    if (nodeId) this.lastCall.set(nodeId, toolCallId);
    out.push({
      type: EventType.TOOL_CALL_START,
      toolCallId,
      toolCallName: data.tool,
      ...(parent ? { parentMessageId: parent } : {}),
    });
    if (data.args) out.push({ type: EventType.TOOL_CALL_ARGS, toolCallId, delta: data.args });
    out.push({ type: EventType.TOOL_CALL_END, toolCallId });
    return out;
  }

  /** An agent's turn ended: its tool results, as the model was given them. */
  private toolResults(nodeId: string | undefined, data: TurnData | undefined): AGUIEvent[] {
    const out: AGUIEvent[] = [...this.closeText(nodeId)];
    for (const r of data?.turn?.toolResults ?? []) {
      out.push({
        type: EventType.TOOL_CALL_RESULT,
        messageId: `${r.tool_call_id}:result`,
        toolCallId: r.tool_call_id,
        content: r.content,
        role: 'tool',
      });
    }
    return out;
  }

  private openStep(nodeId: string): AGUIEvent[] {
    if (this.steps.has(nodeId)) return [];
    this.steps.add(nodeId);
    return [{ type: EventType.STEP_STARTED, stepName: nodeId }];
  }

  private closeStep(nodeId: string): AGUIEvent[] {
    if (!this.steps.delete(nodeId)) return [];
    return [{ type: EventType.STEP_FINISHED, stepName: nodeId }];
  }

  /** Closes the open text message (only when it is `nodeId`'s, if one is named). */
  private closeText(nodeId?: string): AGUIEvent[] {
    if (!this.message || (nodeId !== undefined && this.message.nodeId !== nodeId)) return [];
    const messageId = this.message.id;
    this.message = undefined;
    return [{ type: EventType.TEXT_MESSAGE_END, messageId }];
  }

  private closeAll(): AGUIEvent[] {
    return [...this.closeText(), ...[...this.steps].flatMap((id) => this.closeStep(id))];
  }

  private nodeStatus(nodeId: string, status: string): AGUIEvent {
    return { type: EventType.STATE_DELTA, delta: [{ op: 'add', path: nodePath(nodeId), value: status }] };
  }

  private addUsage(
    data: { model?: string; promptTokens?: number; completionTokens?: number } | undefined,
  ): void {
    const model = data?.model ?? 'unknown';
    const seen = this.usage.get(model) ?? { model, inputTokens: 0, outputTokens: 0, totalTokens: 0 };
    const input = (seen.inputTokens ?? 0) + (data?.promptTokens ?? 0);
    const output = (seen.outputTokens ?? 0) + (data?.completionTokens ?? 0);
    this.usage.set(model, { model, inputTokens: input, outputTokens: output, totalTokens: input + output });
  }

  /** The model calls this AG-UI run saw, one entry per model (absent when there were none). */
  private usageOf(): { usage?: TokenUsage[] } {
    return this.usage.size ? { usage: [...this.usage.values()] } : {};
  }
}

function messageOf(kind: InterruptKind, data: AwaitedData): string {
  switch (kind) {
    case 'tool_approval':
      return data.approval
        ? `the tool call ${data.approval.tool} waits for approval: ${data.approval.reason}`
        : 'a tool call waits for approval';
    case 'budget':
      return data.budget
        ? `the run spent its money budget ($${data.budget.spentUsd} of $${data.budget.costUsd}): raise it or stop`
        : 'the run spent its money budget: raise it or stop';
    case 'signal':
      return `the run waits for the signal "${data.signal}"`;
  }
}
