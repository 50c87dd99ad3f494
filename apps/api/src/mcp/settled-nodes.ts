/**
 * A run's progress as MCP reports it, pure: the number of its nodes that have settled, read from
 * the run's events, with the number of nodes it has when that is known. MCP asks that `progress`
 * strictly increase: a node counts once whatever it goes through (a resumed run settles a node
 * again), and only an event that adds a node yields a report.
 */

/** What the tally reads of a run event. */
export interface ProgressEvent {
  readonly type: string;
  readonly nodeId?: string;
  readonly data?: unknown;
}

/** One `notifications/progress` worth of news (without its token). */
export interface RunProgress {
  /** Nodes settled so far. */
  readonly progress: number;
  /** The run's node count, when its graph is known; never below `progress`. */
  readonly total?: number;
  readonly message: string;
}

/** Events that settle a node, and the word each reports. */
const SETTLED: Readonly<Record<string, string>> = {
  'node.succeeded': 'succeeded',
  'node.failed': 'failed',
  'node.skipped': 'skipped',
  'node.cancelled': 'cancelled',
  // A rerun's node taken from the run it forks: settled from the start.
  'node.reused': 'reused',
};

export class SettledNodes {
  private readonly settled = new Set<string>();

  /** @param total the nodes of the run's graph when it has one already (a graph run's). */
  constructor(private total: number | undefined = undefined) {}

  /** Reads one event: the progress to report when it settled a node not counted yet. */
  read(event: ProgressEvent): RunProgress | undefined {
    if (event.type === 'plan') {
      // A task's plan (or replan) is installed: its node count is the run's size from now on.
      const nodes = (event.data as { nodes?: unknown } | undefined)?.nodes;
      if (typeof nodes === 'number') this.total = nodes;
      return undefined;
    }
    const word = SETTLED[event.type];
    if (word === undefined || event.nodeId === undefined || this.settled.has(event.nodeId)) return undefined;
    this.settled.add(event.nodeId);
    const progress = this.settled.size;
    return {
      progress,
      ...(this.total !== undefined ? { total: Math.max(this.total, progress) } : {}),
      message: `node ${event.nodeId} ${word}`,
    };
  }
}
