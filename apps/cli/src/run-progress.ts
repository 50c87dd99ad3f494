/**
 * What `tetraloop run --follow` shows, pure: a run's progress built from its events (each node's
 * status, when it started and ended, its attempt), rendered as a line per node with its status and
 * elapsed time — redrawn in place on a terminal, or printed as a line per change otherwise.
 */
import { formatMs } from './text-table.js';

/** What the progress reads of a streamed event: a run event, or the notice that some were trimmed. */
export interface StreamedRunEvent {
  readonly seq?: number;
  readonly type: string;
  readonly ts?: number;
  readonly nodeId?: string;
  readonly data?: unknown;
}

export type NodeStatus =
  | 'pending'
  | 'queued'
  | 'running'
  | 'retrying'
  | 'throttled'
  | 'waiting'
  | 'succeeded'
  | 'failed'
  | 'skipped'
  | 'cancelled';

export interface NodeProgress {
  readonly id: string;
  status: NodeStatus;
  /** Epoch ms of its first start. */
  startedAt?: number;
  /** Epoch ms of its snapshot. */
  finishedAt?: number;
  attempt?: number;
  /** A rerun's node taken from its origin: it does not run here. */
  reused?: boolean;
  /** What a custom tool last said of how far its call is (`node.progress`), while it runs. */
  progress?: { fraction: number; message?: string };
}

const FINAL: ReadonlySet<NodeStatus> = new Set(['succeeded', 'failed', 'skipped', 'cancelled']);
const MARK: Record<NodeStatus, string> = {
  pending: '·',
  queued: '○',
  running: '▶',
  retrying: '↻',
  throttled: '⏸',
  waiting: '⏳',
  succeeded: '✓',
  failed: '✗',
  skipped: '-',
  cancelled: '⊘',
};

export class RunProgress {
  /** The run's status as its events say (`queued` until it starts). */
  status = 'queued';
  startedAt: number | undefined;
  finishedAt: number | undefined;
  private readonly nodes = new Map<string, NodeProgress>();

  constructor(readonly runId: string) {}

  /** Nodes known before any event (the run document's), with their status there. */
  seed(nodes: Record<string, { status: string; startedAt?: string; finishedAt?: string }>): void {
    for (const [id, node] of Object.entries(nodes)) {
      if (this.nodes.has(id)) continue;
      const started = node.startedAt ? Date.parse(node.startedAt) : undefined;
      const finished = node.finishedAt ? Date.parse(node.finishedAt) : undefined;
      this.nodes.set(id, {
        id,
        status: (node.status as NodeStatus) ?? 'pending',
        ...(started !== undefined ? { startedAt: started } : {}),
        ...(finished !== undefined ? { finishedAt: finished } : {}),
      });
    }
  }

  /**
   * Takes one event in; answers the node whose status it changed (or `run` for the run's own), for
   * a line per change, or undefined when nothing shown changed.
   */
  apply(event: StreamedRunEvent): NodeProgress | 'run' | undefined {
    const ts = event.ts ?? Date.now();
    if (event.type.startsWith('run.')) return this.applyRun(event, ts);
    if (event.nodeId === undefined) return undefined;
    const node = this.node(event.nodeId);
    const shown = (): string =>
      `${node.status}/${node.attempt ?? ''}/${node.progress ? `${node.progress.fraction}/${node.progress.message ?? ''}` : ''}`;
    const before = shown();
    const data = (event.data ?? {}) as { status?: string; attempt?: number; startedAt?: string };
    switch (event.type) {
      case 'node.queued':
        node.status = 'queued';
        break;
      case 'node.started':
        node.status = 'running';
        node.startedAt ??= data.startedAt ? Date.parse(data.startedAt) : ts;
        if (data.attempt !== undefined) node.attempt = data.attempt;
        break;
      case 'node.iteration':
        node.status = 'running';
        break;
      case 'node.progress': {
        const { fraction, message } = data as { fraction?: number; message?: string };
        if (typeof fraction === 'number')
          node.progress = { fraction, ...(typeof message === 'string' ? { message } : {}) };
        break;
      }
      case 'node.retrying':
        node.status = 'retrying';
        if (data.attempt !== undefined) node.attempt = data.attempt + 1;
        break;
      case 'node.throttled':
        node.status = 'throttled';
        break;
      case 'signal.awaited':
        node.status = 'waiting';
        break;
      case 'node.reused':
        node.status = (data.status as NodeStatus | undefined) ?? 'succeeded';
        node.reused = true;
        break;
      case 'node.succeeded':
      case 'node.failed':
      case 'node.skipped':
      case 'node.cancelled':
        node.status = event.type.slice(5) as NodeStatus;
        node.finishedAt = ts;
        break;
      default:
        return undefined;
    }
    // A node that moved on leaves its last progress behind.
    if (event.type !== 'node.progress' && node.status !== 'running') delete node.progress;
    return shown() === before ? undefined : node;
  }

  /** A run event; `run` when the run's status changed. */
  private applyRun(event: StreamedRunEvent, ts: number): 'run' | undefined {
    const data = (event.data ?? {}) as { status?: string };
    const before = this.status;
    switch (event.type) {
      case 'run.started':
        this.status = 'running';
        this.startedAt ??= ts;
        break;
      case 'run.resumed':
        this.status = 'queued';
        this.finishedAt = undefined;
        break;
      case 'run.decided':
        this.status = data.status ?? this.status;
        break;
      case 'run.finished':
        this.status = data.status ?? this.status;
        this.finishedAt = ts;
        break;
      default:
        return undefined;
    }
    return this.status === before ? undefined : 'run';
  }

  private node(id: string): NodeProgress {
    let node = this.nodes.get(id);
    if (!node) {
      node = { id, status: 'pending' };
      this.nodes.set(id, node);
    }
    return node;
  }

  /** The run's header line. */
  headline(now: number): string {
    const elapsed = this.startedAt === undefined ? undefined : (this.finishedAt ?? now) - this.startedAt;
    return `run ${this.runId}  ${this.status}${elapsed === undefined ? '' : `  ${formatMs(elapsed)}`}`;
  }

  /** One node's line: mark, id, status (and attempt), elapsed time. */
  line(node: NodeProgress, now: number, width = this.idWidth()): string {
    const elapsed =
      node.startedAt === undefined
        ? undefined
        : (node.finishedAt ?? (FINAL.has(node.status) ? node.startedAt : now)) - node.startedAt;
    const status = node.reused
      ? `${node.status} (reused)`
      : node.status === 'retrying' && node.attempt !== undefined
        ? `retrying (attempt ${node.attempt})`
        : node.status === 'running' && node.progress
          ? `running ${Math.round(node.progress.fraction * 100)}%`
          : node.status;
    const note = node.status === 'running' && node.progress?.message ? `  ${node.progress.message}` : '';
    return `  ${MARK[node.status]} ${node.id.padEnd(width)}  ${status.padEnd(22)}${
      elapsed === undefined || node.reused ? '' : formatMs(elapsed)
    }${note}`.trimEnd();
  }

  /**
   * The whole view: the headline, then a line per node in the order they became known. Past
   * `maxLines`, the nodes that settle nothing to watch (succeeded, skipped, pending…) are counted
   * in one line instead.
   */
  render(now: number, maxLines = 40): string[] {
    const nodes = [...this.nodes.values()];
    const width = this.idWidth();
    if (nodes.length + 1 <= maxLines)
      return [this.headline(now), ...nodes.map((n) => this.line(n, now, width))];
    const watched = nodes.filter((n) => !['pending', 'succeeded', 'skipped'].includes(n.status));
    const shown = watched.slice(0, Math.max(0, maxLines - 2));
    const counts = new Map<string, number>();
    for (const n of nodes) if (!shown.includes(n)) counts.set(n.status, (counts.get(n.status) ?? 0) + 1);
    const rest = [...counts].map(([status, n]) => `${n} ${status}`).join(', ');
    return [
      this.headline(now),
      ...shown.map((n) => this.line(n, now, width)),
      `  … ${nodes.length - shown.length} more: ${rest}`,
    ];
  }

  private idWidth(): number {
    return Math.min(40, Math.max(4, ...[...this.nodes.keys()].map((id) => id.length)));
  }
}
