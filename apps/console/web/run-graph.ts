/**
 * The run's graph, laid out by dagre (ranks left to right, edges routed around nodes) and drawn
 * as SVG. The layout is computed again only when the graph's shape changes (a replan); status
 * changes only touch each node's `data-status`, and a custom tool's progress only the width of a
 * bar along the bottom of its box (`data-progress` while shown), so a live run does not jump about.
 */
import { graphlib, layout, type EdgeLabel, type GraphLabel, type NodeLabel } from '@dagrejs/dagre';
import type { RunDocument } from '@tetraloop/client';
import { h, svg } from './dom.js';
import { progressText, type NodeProgress } from './node-progress.js';

type GraphShape = NonNullable<RunDocument['graph']>;
type PlanNode = GraphShape['nodes'][number];

const NODE_HEIGHT = 34;
/** The progress bar inside a node's box: its inset from the box's sides and bottom, and its height. */
const BAR = { inset: 6, height: 3 } as const;

/** Every edge of the plan between nodes of the run, nested graphs' edges under their `parent/` prefix. */
export function planEdges(doc: RunDocument): [string, string][] {
  const known = new Set(Object.keys(doc.nodes));
  const out: [string, string][] = [];
  const walk = (
    graph: { nodes: readonly unknown[]; edges?: readonly (readonly string[])[] },
    prefix: string,
  ): void => {
    for (const edge of graph.edges ?? []) {
      const [from, to] = [`${prefix}${edge[0]}`, `${prefix}${edge[1]}`];
      if (known.has(from) && known.has(to)) out.push([from, to]);
    }
    for (const node of graph.nodes as PlanNode[]) {
      const nested = (node as { graph?: unknown }).graph;
      if (typeof nested === 'object' && nested !== null && 'nodes' in nested) {
        walk(nested as Parameters<typeof walk>[0], `${prefix}${node.id}/`);
      }
    }
  };
  if (doc.graph) walk(doc.graph, '');
  return out;
}

export interface GraphView {
  readonly element: HTMLElement;
  /** `progress`: what to show of a node's progress (none: no bar). */
  update(
    doc: RunDocument,
    critical: readonly string[],
    selected: string | undefined,
    progress: (nodeId: string) => NodeProgress | undefined,
  ): void;
}

interface NodeEls {
  readonly group: SVGGElement;
  readonly title: SVGTitleElement;
  readonly bar: SVGRectElement;
  /** The bar's width at 100%. */
  readonly full: number;
}

export function graphView(onSelect: (nodeId: string) => void): GraphView {
  const element = h('div', { class: 'graph', 'data-role': 'graph' });
  let shape = '';
  const nodeEls = new Map<string, NodeEls>();
  const edgeEls = new Map<string, SVGPathElement>();

  function draw(ids: string[], edges: [string, string][]): void {
    const g = new graphlib.Graph<GraphLabel, NodeLabel, EdgeLabel>();
    g.setGraph({ rankdir: 'LR', nodesep: 18, ranksep: 50, marginx: 10, marginy: 10 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const id of ids) g.setNode(id, { width: Math.max(80, id.length * 7.5 + 28), height: NODE_HEIGHT });
    for (const [from, to] of edges) g.setEdge(from, to);
    layout(g);
    const { width = 0, height = 0 } = g.graph();
    const canvas = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img' });
    canvas.append(
      svg(
        'defs',
        {},
        svg(
          'marker',
          {
            id: 'arrow',
            viewBox: '0 0 10 10',
            refX: 9,
            refY: 5,
            markerWidth: 8,
            markerHeight: 8,
            markerUnits: 'userSpaceOnUse',
            orient: 'auto',
          },
          svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }),
        ),
      ),
    );
    nodeEls.clear();
    edgeEls.clear();
    for (const { v, w } of g.edges()) {
      const points = g.edge(v, w).points ?? [];
      const d = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x},${p.y}`).join(' ');
      const path = svg('path', { d, class: 'edge', 'marker-end': 'url(#arrow)' });
      edgeEls.set(`${v}\u0000${w}`, path);
      canvas.append(path);
    }
    for (const id of ids) {
      const n = g.node(id);
      const [x, y] = [n.x ?? 0, n.y ?? 0];
      const full = n.width - 2 * BAR.inset;
      const barAt = { x: BAR.inset, y: n.height - BAR.inset - BAR.height, height: BAR.height, rx: 1.5 };
      const bar = svg('rect', { ...barAt, class: 'progress-bar', width: 0 });
      const title = svg('title', {}, id);
      const group = svg(
        'g',
        {
          class: 'node',
          'data-node-id': id,
          transform: `translate(${x - n.width / 2},${y - n.height / 2})`,
          tabindex: 0,
          role: 'button',
          onclick: () => onSelect(id),
          onkeydown: (event) => {
            if ((event as KeyboardEvent).key === 'Enter') onSelect(id);
          },
        },
        svg('rect', { width: n.width, height: n.height, rx: 6 }),
        svg(
          'text',
          { x: n.width / 2, y: n.height / 2, 'dominant-baseline': 'central', 'text-anchor': 'middle' },
          id,
        ),
        svg('g', { class: 'progress' }, svg('rect', { ...barAt, class: 'progress-track', width: full }), bar),
        title,
      );
      nodeEls.set(id, { group, title, bar, full });
      canvas.append(group);
    }
    element.replaceChildren(canvas);
  }

  return {
    element,
    update(doc, critical, selected, progress) {
      const ids = Object.keys(doc.nodes);
      const edges = planEdges(doc);
      const nextShape = JSON.stringify([ids, edges]);
      if (nextShape !== shape) {
        shape = nextShape;
        draw(ids, edges);
      }
      const onPath = new Set(critical);
      for (const [id, { group, title, bar, full }] of nodeEls) {
        group.setAttribute('data-status', doc.nodes[id]?.status ?? 'pending');
        group.classList.toggle('critical', onPath.has(id));
        group.classList.toggle('selected', id === selected);
        const report = progress(id);
        if (report) {
          group.setAttribute('data-progress', String(report.fraction));
          bar.setAttribute('width', String(full * report.fraction));
          title.textContent = `${id}: ${progressText(report)}`;
        } else {
          group.removeAttribute('data-progress');
          title.textContent = id;
        }
      }
      const criticalEdges = new Set(critical.slice(1).map((id, i) => `${critical[i]}\u0000${id}`));
      for (const [key, el] of edgeEls) el.classList.toggle('critical', criticalEdges.has(key));
    },
  };
}
