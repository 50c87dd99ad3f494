/**
 * The session variant of `npm run chaos`: sessions that each receive a series of messages (mode
 * `followup`, so every message is its own run, in order) through the same faults as the runs, and
 * the checks made afterwards: every message answered once, in order, and no lane left holding
 * anything.
 *
 * A client of a session sends its messages one after the other, each once the previous one was
 * placed (answered `202` with its run id, or `duplicate` for a retry), and re-POSTs a message with
 * the same `Idempotency-Key` on a connection error, a 5xx/429, or a `202 {queued: true}` that says
 * the sense pool has not placed it yet (its job may be on a worker that was just killed). Session runs are loop runs of the agent `main`; the model
 * is the loopback scripted server, answering `echo: <message>` after a delay.
 */
import { TetraloopApiError, type TetraloopClient } from '@tetraloop/client';
import type { ChatRequest, ScriptedReply } from '../../test/support/model-server.js';

export interface SessionMessage {
  readonly index: number;
  readonly text: string;
  /** The message's Idempotency-Key, also its `eventId`. */
  readonly key: string;
  /** Pause before it is sent, after the previous one was answered. */
  readonly gapMs: number;
  posts: number;
  /** Answers `202 {queued: true}` without a run id: not placed within the API's wait. */
  unplaced: number;
  /** The answer that accepted it. */
  placed?: Placed;
  acceptedAt?: number;
  refused?: string;
}

export interface ChaosSession {
  readonly key: string;
  /** When it sends its first message, from the start of the fault window. */
  readonly startMs: number;
  readonly messages: SessionMessage[];
}

/** What `POST /v1/sessions/:key/messages` answers (the fields used here). */
interface Placed {
  runId?: string;
  queued: boolean;
  duplicate?: boolean;
}

interface SessionView {
  running: string | null;
  queued: unknown[];
}

/** What a session's run documents say (the fields used here). */
interface SessionRunView {
  runId: string;
  status: string;
  task: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  metadata: Record<string, unknown> | null;
  error: unknown;
}

const SETTLED = new Set(['succeeded', 'failed', 'cancelled', 'timed_out']);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * `count` sessions of `messages` messages each, their starts spread over the first 90 % of the
 * window; a message follows the previous one's answer after 0–800 ms, so a lane usually still
 * holds a run when the next one arrives.
 */
export function planSessions(
  count: number,
  messages: number,
  windowMs: number,
  rand: () => number,
  stamp: string,
): ChaosSession[] {
  return Array.from({ length: count }, (_, s) => {
    const key = `chaos-${stamp}-s${s}`;
    return {
      key,
      startMs: Math.round((s * windowMs * 0.9) / Math.max(1, count)),
      messages: Array.from({ length: messages }, (_, index) => ({
        index,
        text: `${key} message ${index}`,
        key: `${key}-m${index}`,
        gapMs: Math.round(rand() * 800),
        posts: 0,
        unplaced: 0,
      })),
    };
  });
}

/** The model of session runs: `echo: <the user's message>` after 150–600 ms (fixed per message). */
export function echoModel(request: ChatRequest): ScriptedReply {
  const text = [...request.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  let hash = 0;
  for (const c of text) hash = (hash * 31 + c.charCodeAt(0)) >>> 0;
  return { content: `echo: ${text}`, latencyMs: 150 + (hash % 450) };
}

/**
 * Sends a session's messages in order, each once the previous one was accepted, starting at
 * `t0 + startMs`; gives a message up (and the rest after it) at `giveUpAt`.
 */
export async function driveSession(
  client: TetraloopClient,
  session: ChaosSession,
  t0: number,
  giveUpAt: number,
  now: () => number,
): Promise<void> {
  await sleep(Math.max(0, t0 + session.startMs - now()));
  for (const m of session.messages) {
    await sleep(m.gapMs);
    const message = {
      text: m.text,
      mode: 'followup' as const,
      eventId: m.key,
      metadata: { message: m.index },
    };
    for (;;) {
      m.posts += 1;
      try {
        const answer = (await client.sessions.send(session.key, message)) as Placed;
        // Placed: its run (or, for a retry, the word that it is in already). `{queued: true}`
        // alone says the sense pool has not placed it within the API's 5 s: not yet in the
        // lane, so the next message could overtake it; it is sent again with the same event id.
        if (answer.runId !== undefined || answer.duplicate === true) {
          m.placed = answer;
          m.acceptedAt = now();
          break;
        }
        m.unplaced += 1;
      } catch (err) {
        if (err instanceof TetraloopApiError && err.status < 500 && err.status !== 429) {
          m.refused = `${err.status} ${JSON.stringify(err.body)}`;
          break;
        }
        // Unreachable, reset, or 5xx/429: the API (or Redis behind it) is down; retry.
      }
      if (now() > giveUpAt) {
        m.refused = 'gave up retrying';
        break;
      }
      await sleep(200);
    }
    // A client does not send the next message of a conversation its last one did not get into.
    if (m.refused !== undefined) return;
  }
}

async function laneOf(client: TetraloopClient, sessionKey: string): Promise<SessionView | undefined> {
  try {
    return await client.sessions.get(sessionKey);
  } catch {
    return undefined;
  }
}

const idle = (view: SessionView | undefined): boolean =>
  view !== undefined && view.running === null && view.queued.length === 0;

/**
 * Polls every session's lane until each holds no run and nothing waits in it, or `deadline`
 * passes. Returns when each lane was first seen idle (epoch ms), and the lanes still busy.
 */
export async function waitForIdleLanes(
  client: TetraloopClient,
  sessions: readonly ChaosSession[],
  deadline: number,
  now: () => number,
): Promise<{ idleAt: Map<string, number>; busy: { sessionKey: string; lane: SessionView | null }[] }> {
  const idleAt = new Map<string, number>();
  let last = new Map<string, SessionView | undefined>();
  for (;;) {
    const pending = sessions.filter((s) => !idleAt.has(s.key) && s.messages.some((m) => m.placed));
    const views = await Promise.all(pending.map((s) => laneOf(client, s.key)));
    last = new Map(pending.map((s, i) => [s.key, views[i]]));
    pending.forEach((s, i) => {
      if (idle(views[i])) idleAt.set(s.key, now());
    });
    if (pending.every((s) => idleAt.has(s.key)) || now() > deadline) break;
    await sleep(1000);
  }
  const busy = sessions
    .filter((s) => !idleAt.has(s.key) && s.messages.some((m) => m.placed))
    .map((s) => ({ sessionKey: s.key, lane: last.get(s.key) ?? null }));
  return { idleAt, busy };
}

/** A transcript's lines (without the header line), or undefined when it could not be read. */
async function transcriptOf(
  client: TetraloopClient,
  sessionKey: string,
): Promise<Record<string, unknown>[] | undefined> {
  try {
    const page = await client.sessions.transcript(sessionKey, { limit: 10_000 });
    return page.lines;
  } catch {
    return undefined;
  }
}

export interface SessionCheck {
  readonly sessionKey: string;
  /** Messages accepted (202). */
  readonly accepted: number;
  /** Messages whose one run settled, by the run's status. */
  readonly statuses: Record<string, number>;
  /** Messages with no run, or whose run did not settle; `modelCalls`: how often the model was asked it. */
  readonly unanswered: { index: number; why: string; inTranscript: boolean; modelCalls: number }[];
  /** Messages answered by more than one run. */
  readonly answeredTwice: { index: number; runIds: string[] }[];
  /** Message i + 1 whose run started before the run of message i settled. */
  readonly outOfOrder: { index: number; startedAt: string | null; previousFinishedAt: string | null }[];
  /** User message lines of the transcript not in the order sent, or not once each. */
  readonly transcriptOrderOk: boolean;
  /** Replies (`echo: …`) in the transcript. */
  readonly replies: number;
  /** Succeeded runs whose reply is missing from the transcript (0) or there more than once. */
  readonly replyCounts: { runId: string; replies: number }[];
  /** Milliseconds each run waited in its lane after the previous one settled. */
  readonly handoverMs: number[];
  /** When its last run settled (epoch ms), if any did. */
  readonly lastFinishedAt: number | null;
}

/**
 * Looks at one session after its lane went idle: each message's run, found from its answer and
 * from the `run` lines of the transcript (by the `metadata.message` the message carried); whether
 * each message was answered by exactly one settled run; whether the runs ran in the order the
 * messages were sent, one after the other; and whether the transcript has every message once, in
 * order.
 */
export async function checkSession(
  client: TetraloopClient,
  session: ChaosSession,
  modelCallsFor: (text: string) => number,
): Promise<SessionCheck> {
  const lines = (await transcriptOf(client, session.key)) ?? [];
  const runIds = new Set<string>();
  for (const m of session.messages) if (m.placed?.runId) runIds.add(m.placed.runId);
  for (const line of lines) if (line.type === 'run' && typeof line.runId === 'string') runIds.add(line.runId);
  const docs = (
    await Promise.all(
      [...runIds].map((id) =>
        client.get(id).then(
          (doc) => doc as unknown as SessionRunView,
          () => undefined,
        ),
      ),
    )
  ).filter((d): d is SessionRunView => d !== undefined);
  const runsOf = new Map<number, SessionRunView[]>();
  for (const doc of docs) {
    const index = doc.metadata?.message;
    if (typeof index !== 'number') continue;
    runsOf.set(index, [...(runsOf.get(index) ?? []), doc]);
  }

  const accepted = session.messages.filter((m) => m.placed !== undefined);
  const said = lines.filter((l) => l.type === 'message' && l.role === 'user').map((l) => String(l.text));
  const statuses: Record<string, number> = {};
  const unanswered: SessionCheck['unanswered'] = [];
  const answeredTwice: SessionCheck['answeredTwice'] = [];
  const outOfOrder: SessionCheck['outOfOrder'] = [];
  const handoverMs: number[] = [];
  let previous: SessionRunView | undefined;
  for (const m of accepted) {
    const runs = runsOf.get(m.index) ?? [];
    if (runs.length > 1) answeredTwice.push({ index: m.index, runIds: runs.map((r) => r.runId) });
    const run = runs[0];
    const missing = (why: string): void =>
      void unanswered.push({
        index: m.index,
        why,
        inTranscript: said.includes(m.text),
        modelCalls: modelCallsFor(m.text),
      });
    if (!run) missing('no run found');
    else if (!SETTLED.has(run.status) || run.finishedAt === null)
      missing(`run ${run.runId} is ${run.status}`);
    else statuses[run.status] = (statuses[run.status] ?? 0) + 1;
    if (run && previous) {
      const started = run.startedAt ?? run.finishedAt;
      const before = previous.finishedAt;
      if (started === null || before === null || Date.parse(started) < Date.parse(before))
        outOfOrder.push({ index: m.index, startedAt: started, previousFinishedAt: before });
      else handoverMs.push(Date.parse(started) - Date.parse(before));
    }
    if (run) previous = run;
  }
  const finished = docs.flatMap((d) => (d.finishedAt ? [Date.parse(d.finishedAt)] : []));

  const transcriptOrderOk = said.length === accepted.length && accepted.every((m, i) => said[i] === m.text);
  const replyLines = lines.filter(
    (l) => l.type === 'message' && l.role === 'assistant' && String(l.text).startsWith('echo: '),
  );
  const replies = replyLines.length;
  // Each succeeded run of a message writes one reply: none is a lost answer, two a repeated one.
  const repliesOf = (runId: string): number => replyLines.filter((l) => l.runId === runId).length;
  const replyCounts = [...runsOf.values()]
    .flat()
    .filter((d) => d.status === 'succeeded')
    .map((d) => ({ runId: d.runId, replies: repliesOf(d.runId) }))
    .filter((r) => r.replies !== 1);
  return {
    sessionKey: session.key,
    accepted: accepted.length,
    statuses,
    unanswered,
    answeredTwice,
    outOfOrder,
    transcriptOrderOk,
    replies,
    replyCounts,
    handoverMs,
    lastFinishedAt: finished.length ? Math.max(...finished) : null,
  };
}

/** Counts over all sessions, what went wrong where, and the sessions' gates. */
export function summarizeSessions(
  sessions: readonly ChaosSession[],
  checks: readonly SessionCheck[],
  lanes: Awaited<ReturnType<typeof waitForIdleLanes>>,
  faults: { redisKilledAt: number; lastFault: number; fsyncWindowMs: number },
) {
  const messages = sessions.flatMap((s) => s.messages.map((m) => ({ session: s.key, m })));
  const sent = messages.filter(({ m }) => m.posts > 0);
  const acceptedAt = new Map(messages.map(({ session, m }) => [`${session}#${m.index}`, m.acceptedAt]));
  // Like runs: a message acknowledged within the last second before the Redis kill may be lost
  // by `appendfsync everysec`; it is reported, not gated.
  const inFsyncWindow = (session: string, index: number): boolean => {
    const at = acceptedAt.get(`${session}#${index}`);
    return (
      at !== undefined &&
      faults.redisKilledAt > 0 &&
      at >= faults.redisKilledAt - faults.fsyncWindowMs &&
      at < faults.redisKilledAt
    );
  };
  const unanswered = checks.flatMap((c) =>
    c.unanswered.map((u) => ({
      sessionKey: c.sessionKey,
      ...u,
      inFsyncWindow: inFsyncWindow(c.sessionKey, u.index),
    })),
  );
  const statuses: Record<string, number> = {};
  for (const c of checks)
    for (const [k, v] of Object.entries(c.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  const handovers = checks.flatMap((c) => c.handoverMs);
  const lastFinished = Math.max(0, ...checks.map((c) => c.lastFinishedAt ?? 0));
  const refused = messages
    .filter(({ m }) => m.refused !== undefined)
    .map(({ session, m }) => ({
      sessionKey: session,
      index: m.index,
      why: m.refused,
    }));
  const answeredTwice = checks.flatMap((c) =>
    c.answeredTwice.map((a) => ({ sessionKey: c.sessionKey, ...a })),
  );
  const outOfOrder = checks.flatMap((c) => c.outOfOrder.map((o) => ({ sessionKey: c.sessionKey, ...o })));
  const transcriptOutOfOrder = checks.filter((c) => !c.transcriptOrderOk).map((c) => c.sessionKey);
  const sorted = [...handovers].sort((a, b) => a - b);
  const at = (q: number): number | undefined =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return {
    sessions: sessions.length,
    messagesPerSession: sessions[0]?.messages.length ?? 0,
    sent: sent.length,
    accepted: sent.filter(({ m }) => m.placed !== undefined).length,
    messagesPostedMoreThanOnce: sent.filter(({ m }) => m.posts > 1).length,
    postsRetried: sent.reduce((n, { m }) => n + m.posts - 1, 0),
    answeredDuplicate: sent.filter(({ m }) => m.placed?.duplicate === true).length,
    answeredNotYetPlaced: sent.reduce((n, { m }) => n + m.unplaced, 0),
    refused,
    statuses,
    replies: checks.reduce((n, c) => n + c.replies, 0),
    repliesMissing: checks.flatMap((c) => c.replyCounts.filter((r) => r.replies === 0)),
    repliesRepeated: checks.flatMap((c) => c.replyCounts.filter((r) => r.replies > 1)),
    unanswered,
    answeredTwice,
    outOfOrder,
    transcriptOutOfOrder,
    stuckLanes: lanes.busy,
    lastRunSettledMsAfterLastFault: lastFinished ? Math.round(lastFinished - faults.lastFault) : null,
    handoverMs: sorted.length
      ? { n: sorted.length, median: at(0.5), p95: at(0.95), max: sorted.at(-1) }
      : { n: 0 },
    gates: {
      everyMessageAnsweredOnce:
        refused.length === 0 && unanswered.every((u) => u.inFsyncWindow) && answeredTwice.length === 0,
      everyReplyOnce: checks.every((c) => c.replyCounts.length === 0),
      messagesInOrder: outOfOrder.length === 0 && transcriptOutOfOrder.length === 0,
      noStuckLanes: lanes.busy.length === 0,
    },
  };
}
export type SessionsSummary = ReturnType<typeof summarizeSessions>;
