/**
 * The run's timeline: one row per node, a bar from its first start to its snapshot (to now while
 * it runs), preceded by a lighter stretch for the time it sat ready in the queue. Times come from
 * the explain (`GET /v1/runs/:id/explain`), which already knows when each node became ready.
 */
import type { RunExplain } from '@tetraloop/client';
import { duration, h } from './dom.js';

const ms = (iso: string | null): number | undefined => (iso ? Date.parse(iso) : undefined);

export function timelineView(explain: RunExplain, onSelect: (nodeId: string) => void): HTMLElement {
  const now = Date.now();
  const spans = explain.nodes
    .filter((n) => !n.reused && n.startedAt)
    .map((n) => ({
      node: n,
      ready: ms(n.readyAt) ?? ms(n.startedAt)!,
      start: ms(n.startedAt)!,
      end: ms(n.finishedAt) ?? now,
    }));
  const rows = h('div', { class: 'timeline', 'data-role': 'timeline' });
  if (spans.length === 0) {
    rows.append(h('p', { class: 'muted' }, 'No node has started yet.'));
    return rows;
  }
  const t0 = Math.min(...spans.map((s) => Math.min(s.ready, s.start)));
  const t1 = Math.max(t0 + 1, ...spans.map((s) => s.end));
  const at = (t: number): string => `${(((t - t0) / (t1 - t0)) * 100).toFixed(3)}%`;
  const width = (a: number, b: number): string => `${(Math.max(0, (b - a) / (t1 - t0)) * 100).toFixed(3)}%`;
  for (const { node, ready, start, end } of spans) {
    const queued = h('div', { class: 'queued' });
    queued.style.left = at(ready);
    queued.style.width = width(ready, start);
    const bar = h('div', { class: `bar status-${node.status}${node.critical ? ' critical' : ''}` });
    bar.style.left = at(start);
    bar.style.width = width(start, end);
    rows.append(
      h(
        'div',
        {
          class: 'row',
          'data-timeline-node': node.id,
          'data-status': node.status,
          onclick: () => onSelect(node.id),
        },
        h('span', { class: 'label' }, node.id),
        h('div', { class: 'track' }, queued, bar),
        h('span', { class: 'took' }, duration(node.durationMs)),
      ),
    );
  }
  rows.append(h('p', { class: 'muted axis' }, `0 — ${duration(t1 - t0)}`));
  return rows;
}
