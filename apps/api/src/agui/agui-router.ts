/**
 * `POST /v1/agui/:agentId`: AG-UI over HTTP (docs/interop.md#ag-ui). The request is AG-UI's
 * `RunAgentInput`; its thread is a session of the caller's tenant, its newest user message goes to
 * the session's lane as a message does, and the answer is the session run's events as AG-UI events
 * (server-sent, one JSON object per `data:` frame). A run that waits for an approval (or a budget
 * decision, or a signal) ends the AG-UI run with an interrupt outcome; the client's next request
 * answers it with `resume`, and the same Tetraloop run is followed on from where the stream left.
 */
import { EventType, type AGUIEvent } from '@ag-ui/core';
import type { RequestHandler, Response } from 'express';
import {
  BudgetDecision,
  hasScope,
  scopedName,
  type Caller,
  type RunDocument,
  type SignalLimits,
} from '@tetraloop/core/domain';
import { RequestRefusedError } from '@tetraloop/core/runs';
import { callerOf } from '../auth.js';
import { HttpError, zodToHttp } from '../http-errors.js';
import type { LongRequests } from '../long-requests.js';
import { AgentId } from '../requests.js';
import type { RouteName } from '../route-table.js';
import { followRun, openEventStream, type EventStreamDeps } from '../run-events.js';
import { refusalStatus } from '../runs-router.js';
import { placeMessage, type SessionsRouterDeps } from '../sessions-router.js';
import { AguiRunInput, clientData, clientStateOf, newMessageOf } from './agui-input.js';
import { AguiTranslator, parseInterruptId, type InterruptRef, type RunState } from './agui-translator.js';

export interface AguiRouterDeps extends SessionsRouterDeps, EventStreamDeps {
  readonly signalLimits: SignalLimits;
  /** An AG-UI stream holds an event-stream slot, as `GET /v1/runs/:id/events` does. */
  readonly longRequests: LongRequests;
}

/** The Tetraloop run an AG-UI request follows, and the place in its stream to follow it from. */
interface Followed {
  readonly doc: RunDocument;
  readonly after: number;
}

const agentNotFound = (agentId: string): HttpError =>
  new HttpError(404, 'agent_not_found', `no agent "${agentId}" for this tenant`);

const interruptNotFound = (index: number): HttpError =>
  new HttpError(404, 'interrupt_not_found', "no such interrupt of this thread's runs", [
    { path: `resume.${index}.interruptId`, message: 'not an interrupt of this thread and agent' },
  ]);

const invalid = (path: string, message: string): HttpError =>
  new HttpError(400, 'invalid_request', 'the request is invalid', [{ path, message }]);

const runStateOf = (doc: RunDocument): RunState => ({
  runId: doc.runId,
  status: doc.status,
  nodes: Object.fromEntries(Object.entries(doc.nodes).map(([id, node]) => [id, node.status])),
});

/** The signal's payload that answers an interrupt, or `cancel` for a plain wait given up. */
function answerOf(
  kind: InterruptRef['kind'],
  entry: { status: 'resolved' | 'cancelled'; payload?: unknown },
  index: number,
): { payload: unknown } | 'cancel' {
  const cancelled = entry.status === 'cancelled';
  switch (kind) {
    case 'tool_approval':
      // Resolved without a payload is an approval; cancelled is a refusal of the call.
      return { payload: cancelled ? { approved: false } : (entry.payload ?? { approved: true }) };
    case 'budget': {
      if (cancelled) return { payload: { stop: true } };
      const decision = BudgetDecision.safeParse(entry.payload);
      if (!decision.success) throw zodToHttp(decision.error, ['resume', String(index), 'payload']);
      return { payload: decision.data };
    }
    case 'signal':
      // Nobody will send what the run waits for: the run is given up.
      return cancelled ? 'cancel' : { payload: entry.payload ?? null };
  }
}

export function aguiHandlers(deps: AguiRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  /** Answers the previous run's interrupts: the run they name, once it is the thread's and agent's. */
  const resume = async (input: AguiRunInput, agentId: string, caller: Caller): Promise<Followed> => {
    if (!hasScope(caller, 'signals:write')) {
      throw new HttpError(
        403,
        'forbidden',
        'answering an interrupt delivers a signal: the API key lacks the scope signals:write',
      );
    }
    const entries = input.resume!.map((entry, i) => {
      const ref = parseInterruptId(entry.interruptId);
      if (!ref) throw interruptNotFound(i);
      return { entry, ref, i };
    });
    const { runId, seq } = entries[0]!.ref;
    for (const { ref, i } of entries) {
      if (ref.runId !== runId || ref.seq !== seq) {
        throw invalid(
          `resume.${i}.interruptId`,
          'answers another run than resume.0: answer one run at a time',
        );
      }
    }
    const doc = await deps.runs.get(runId);
    if (
      !doc ||
      doc.tenant !== caller.tenant ||
      doc.sessionKey !== scopedName(caller.tenant, input.threadId) ||
      doc.agentId !== agentId
    ) {
      throw interruptNotFound(0);
    }
    const decision = { keyId: caller.keyId, tenant: caller.tenant, at: new Date().toISOString() };
    for (const { entry, ref, i } of entries) {
      const answer = answerOf(ref.kind, entry, i);
      if (answer === 'cancel') {
        await deps.runs.cancel(runId);
        continue;
      }
      const result = await deps.runs.signal(runId, ref.signal, answer.payload, decision, deps.signalLimits);
      if (result.outcome === 'unknown_run') throw interruptNotFound(i);
      if (result.outcome === 'refused') {
        throw new HttpError(refusalStatus(result.code), result.code, result.message, [
          { path: `resume.${i}`, message: result.message },
        ]);
      }
      // `duplicate`: this answer was given before (a retried request); the run is followed all the same.
    }
    return { doc, after: seq };
  };

  const run: RequestHandler = async (req, res) => {
    if (!req.is('application/json')) {
      throw new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
    }
    const agent = AgentId.safeParse(req.params.agentId);
    if (!agent.success) throw zodToHttp(agent.error, ['params', 'agentId']);
    const agentId = agent.data;
    const parsed = AguiRunInput.safeParse(req.body);
    if (!parsed.success) throw zodToHttp(parsed.error);
    const input = parsed.data;
    const caller = callerOf(res);
    // An agent the tenant may not run is, to it, no agent at all.
    await deps.runs.checkAgent(caller.tenant, agentId).catch((err: unknown) => {
      throw err instanceof RequestRefusedError ? agentNotFound(agentId) : err;
    });

    let followed: Followed | undefined;
    let command: string | undefined;
    if (input.resume?.length) {
      followed = await resume(input, agentId, caller);
    } else {
      const message = newMessageOf(input);
      if (!message.ok) throw invalid(message.issue.path, message.issue.message);
      const placed = await placeMessage(
        deps,
        caller.tenant,
        { name: input.threadId, stored: scopedName(caller.tenant, input.threadId) },
        { text: message.text, agentId, mode: 'followup' },
        // The AG-UI message's id is its id in the session: a retried request is taken once and
        // follows the same run. Each message runs after the ones before it (followup).
        message.id,
        clientData(input),
      );
      command = placed.command;
      const doc = placed.runId ? await deps.runs.get(placed.runId) : null;
      if (doc) followed = { doc, after: 0 };
      else if (command === undefined) {
        throw new HttpError(
          503,
          'message_not_placed',
          "the session's lane did not take the message in time; send it again (a message id is taken once)",
        );
      }
    }

    const release = deps.longRequests.admit('events', res);
    openEventStream(res);
    try {
      if (followed) await follow(deps, followed, input, res);
      // A session command (`/new`, `/stop`, …) runs nothing: it is done at once.
      else send(res, commandRun(input, command));
    } finally {
      release();
      res.end();
    }
  };

  return { 'agui.run': run };
}

/** Writes AG-UI events, each one `data:` frame of JSON. */
function send(res: Response, events: readonly AGUIEvent[]): void {
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
}

/** The AG-UI run of a session command: it starts and finishes, its result naming the command. */
function commandRun({ threadId, runId }: AguiRunInput, command: string | undefined): AGUIEvent[] {
  return [
    { type: EventType.RUN_STARTED, threadId, runId },
    { type: EventType.RUN_FINISHED, threadId, runId, result: { command } },
  ];
}

/** Follows the Tetraloop run, answering its events as AG-UI events until the AG-UI run is over. */
async function follow(
  deps: EventStreamDeps & Pick<AguiRouterDeps, 'runs'>,
  { doc, after }: Followed,
  input: AguiRunInput,
  res: Response,
): Promise<void> {
  const translator = new AguiTranslator(
    { threadId: input.threadId, runId: input.runId, tetraloopRunId: doc.runId },
    after,
  );
  send(res, translator.start(clientStateOf(input), runStateOf(doc)));
  const end = await followRun(deps, doc.runId, after, res, {
    event: (e, final) => {
      send(res, translator.next(e, final));
      return translator.over;
    },
    // Caught up: a wait still open ends the AG-UI run with an interrupt.
    readAll: () => {
      send(res, translator.interrupt());
      return translator.over;
    },
    keepAlive: () => res.write(': keep-alive\n\n'),
  });
  if (end === 'settled') {
    const settled = await deps.runs.get(doc.runId);
    if (settled) send(res, translator.settled(settled.status, settled.error));
  }
}
