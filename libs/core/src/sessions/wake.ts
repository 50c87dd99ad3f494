/**
 * A source that wakes its session (`"wake": true` on a timer or file source): each event it writes
 * into the session's environment also starts a session run through the lane, as a message would
 * (the `HEARTBEAT.md` pattern). What the message says is decided here. Pure.
 */
import { createHash } from 'node:crypto';
import { untrustedData } from '../model/untrusted-data.js';
import type { MessageInput } from './sense-jobs.js';

/** The part of a written event a wake message is made from. */
export interface WakeEvent {
  readonly source: string;
  readonly eventId: string;
  readonly type: string;
  readonly payload: unknown;
  /** For a merged burst: how many events it stands for. */
  readonly count?: number;
}

/**
 * The message a waking event sends its session. A timer's payload is the operator's own words
 * (written in the configuration), so a string payload, or an object's `task` or `text`, is the
 * message; anything else a source brings (a file's content, a tick's time) is data from outside and
 * stays where it is, delimited, in the environment: the message only points at it.
 */
export function wakeMessage(event: WakeEvent, trusted: boolean): MessageInput {
  const said = trusted ? spokenOf(event.payload) : undefined;
  const what =
    event.count && event.count > 1 ? `${event.count} "${event.type}" events` : `a "${event.type}" event`;
  return {
    text:
      said ?? `Woken by ${what} of source "${event.source}": see the session's environment for what arrived.`,
    eventId: `wake:${event.source}:${event.eventId}`,
    metadata: { wake: { source: event.source, eventId: event.eventId, type: event.type } },
  };
}

/**
 * What the woken run is handed beside its message: the event as the environment holds it, one
 * delimited block of untrusted data (see `describeEnvironmentEvent`), which an agent reads as a
 * `session_environment` result before its first turn and a planner among its runtime overrides —
 * never as the user's words. The run records the environment version it starts at, so the
 * environment check would not hand it an event written before. None when the message is the
 * payload itself (a timer's own words).
 */
export function wakeData(event: WakeEvent, trusted: boolean): string[] {
  if (trusted && spokenOf(event.payload) !== undefined) return [];
  return [untrustedData({ source: event.source, type: event.type }, event.payload)];
}

/**
 * The id of the wake's message delivery, and of its job: the same for every write of the event, so
 * a write done twice (a redelivered flush) adds one job and, through the run id that derives from
 * it, one run. At most 64 characters, no `:` (BullMQ refuses it in job ids).
 */
export const wakeDeliveryId = (event: Pick<WakeEvent, 'source' | 'eventId'>): string =>
  `wake-${createHash('sha256').update(`${event.source}\0${event.eventId}`).digest('hex').slice(0, 40)}`;

function spokenOf(payload: unknown): string | undefined {
  if (typeof payload === 'string' && payload.trim() !== '') return payload;
  if (typeof payload !== 'object' || payload === null) return undefined;
  const { task, text } = payload as { task?: unknown; text?: unknown };
  const said = typeof task === 'string' ? task : typeof text === 'string' ? text : undefined;
  return said?.trim() ? said : undefined;
}
