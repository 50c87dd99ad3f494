/** The session commands a message can carry, parsed in one place for validation and handling. */
import { LANE_MODES, type LaneMode } from '../state/session-store.js';

/** What `/queue` accepts: a lane mode, or `default` to fall back to the deployment's mode. */
export const QUEUE_ARGUMENTS: readonly string[] = [...LANE_MODES, 'default'];

const QUEUE = /^\/queue(?:\s+(\S+))?\s*$/i;

/**
 * `/queue <mode>` sets the session's default lane mode, `/queue default` clears it. Returns
 * undefined when `text` is not a `/queue` command, `invalid` when its argument is not accepted.
 */
export function parseQueueCommand(text: string): { mode: LaneMode | null } | 'invalid' | undefined {
  const match = QUEUE.exec(text.trim());
  if (!match) return undefined;
  const arg = match[1]?.toLowerCase() ?? '';
  if (arg === 'default') return { mode: null };
  return (LANE_MODES as readonly string[]).includes(arg) ? { mode: arg as LaneMode } : 'invalid';
}
