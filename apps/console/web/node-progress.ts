/**
 * How far a custom tool's call is, as its code said with `ctx.progress(fraction, message)`: the one
 * thing the run page takes from the run's events rather than from the run document, because the
 * API does not store it — it only appends a `node.progress` event. Pure: the latest report of each
 * node, kept from the events the page receives, and whether the node's status lets it be shown.
 */
import type { StreamEvent } from '@tetraloop/client';

/** A node's latest `node.progress`. */
export interface NodeProgress {
  /** From 0 to 1. */
  readonly fraction: number;
  readonly message?: string;
  /** The attempt whose call reported it. */
  readonly attempt?: number;
}

/** The latest report of each node that made one, by node id. */
export type ProgressReports = Map<string, NodeProgress>;

/** After these a node's last report says nothing of it any more: a new attempt starts, or it ended. */
const FORGETS = new Set([
  'node.queued',
  'node.started',
  'node.reused',
  'node.succeeded',
  'node.failed',
  'node.skipped',
  'node.cancelled',
]);

/** Takes one event in; answers whether a node's report changed. */
export function takeProgress(reports: ProgressReports, event: StreamEvent): boolean {
  const nodeId = 'nodeId' in event ? event.nodeId : undefined;
  if (nodeId === undefined) return false;
  if (event.type === 'node.progress') {
    const data = (event.data ?? {}) as { fraction?: unknown; message?: unknown; attempt?: unknown };
    if (typeof data.fraction !== 'number' || !Number.isFinite(data.fraction)) return false;
    reports.set(nodeId, {
      fraction: Math.min(1, Math.max(0, data.fraction)),
      ...(typeof data.message === 'string' && data.message !== '' ? { message: data.message } : {}),
      ...(typeof data.attempt === 'number' ? { attempt: data.attempt } : {}),
    });
    return true;
  }
  return FORGETS.has(event.type) && reports.delete(nodeId);
}

/**
 * The report to show for a node as the run document has it: while it runs (the report of this
 * very attempt), or while it waits to retry (how far the attempt that failed got); none otherwise.
 */
export function progressShown(
  report: NodeProgress | undefined,
  node: { readonly status: string; readonly attempt?: number } | undefined,
): NodeProgress | undefined {
  if (!report || !node) return undefined;
  if (node.status === 'retrying') return report;
  if (node.status !== 'running') return undefined;
  const sameAttempt =
    report.attempt === undefined || node.attempt === undefined || report.attempt === node.attempt;
  return sameAttempt ? report : undefined;
}

/** `50% — customer found`. */
export function progressText(report: NodeProgress): string {
  const percent = `${Math.floor(report.fraction * 100)}%`;
  return report.message ? `${percent} — ${report.message}` : percent;
}
