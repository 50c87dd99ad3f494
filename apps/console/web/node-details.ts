/**
 * The panel of the node a person clicked: its status and error, how far a custom tool's call is
 * while it runs, timings, tokens and cost, the lessons that changed its calls, every attempt, its
 * waits, its input as the run recorded it and its output.
 */
import type { NodeExplain, RunDocument } from '@tetraloop/client';
import { clock, dataTable, duration, h, type Child } from './dom.js';
import { jsonView, type BlobLoader } from './json-view.js';
import { definitionOf, recordedInput } from './node-input.js';
import { progressText, type NodeProgress } from './node-progress.js';
import { paths } from './routes.js';

interface NodeError {
  readonly code: string;
  readonly message: string;
}
interface Attempt {
  readonly attempt: number;
  readonly startedAt: string;
  readonly durationMs: number;
  readonly worker: string;
  readonly error?: NodeError;
  readonly retryDelayMs?: number;
  readonly lessons?: readonly string[];
}
export interface Wait {
  readonly signal: string;
  readonly since: string;
  readonly until: string;
  readonly approval?: { readonly tool: string; readonly reason?: string };
  readonly budget?: { readonly costUsd: number; readonly spentUsd: number };
  readonly decidedBy?: { readonly keyId: string | null; readonly at: string };
}
/** The fields of a node view the panel reads, whatever its status (see `NodeView`). */
export interface NodeFields {
  readonly status: string;
  readonly attempts?: readonly Attempt[];
  readonly error?: NodeError;
  /** What its call was made with, on its snapshot (see `node-input.ts`). */
  readonly input?: unknown;
  readonly output?: unknown;
  readonly startedAt?: string;
  readonly finishedAt?: string;
  readonly durationMs?: number;
  readonly attempt?: number;
  readonly until?: string;
  readonly signal?: string;
  readonly waits?: readonly Wait[];
  readonly reusedFrom?: string;
  /** A map node's items' counts. */
  readonly map?: unknown;
  readonly usage?: {
    readonly promptTokens: number;
    readonly completionTokens: number;
    readonly totalTokens: number;
    readonly costUsd?: number;
  };
}

export const nodeFields = (doc: RunDocument, id: string): NodeFields | undefined => doc.nodes[id];

const fact = (term: string, value: Child): HTMLElement[] => [h('dt', {}, term), h('dd', {}, value)];

export function nodeDetails(
  doc: RunDocument,
  nodeId: string,
  timing: NodeExplain | undefined,
  /** What to show of its progress (see `progressShown`). */
  progress: NodeProgress | undefined,
  loadBlob: BlobLoader,
  actions: Child,
): HTMLElement {
  const node = nodeFields(doc, nodeId);
  const panel = h('section', {
    class: 'card details',
    'data-role': 'node-details',
    'data-node-id': nodeId,
    'data-status': node?.status ?? 'pending',
  });
  if (!node) return panel;
  const definition = definitionOf(doc, nodeId);
  const what = [definition?.kind, definition?.tool].filter((x) => typeof x === 'string').join(' · ');
  panel.append(
    h(
      'h2',
      {},
      nodeId,
      ' ',
      h('span', { class: `badge status-${node.status}` }, node.status),
      ' ',
      h('span', { class: 'muted' }, what),
    ),
    h('div', { class: 'actions' }, actions),
  );
  if (node.reusedFrom) {
    panel.append(
      h(
        'p',
        {},
        'Reused from ',
        h('a', { href: paths.run(node.reusedFrom) }, node.reusedFrom),
        ': it did not run here.',
      ),
    );
  }
  if (progress) {
    // While it waits to retry, how far the attempt that failed got.
    const before = node.status === 'retrying' && progress.attempt !== undefined;
    panel.append(
      h(
        'p',
        { class: 'progress', 'data-role': 'progress', 'data-fraction': progress.fraction },
        `Progress: ${progressText(progress)}`,
        before ? ` (attempt ${progress.attempt})` : '',
        h('progress', { value: progress.fraction, max: 1 }),
      ),
    );
  }
  const error = node.error ?? [...(node.attempts ?? [])].reverse().find((a) => a.error)?.error;
  if (error) {
    panel.append(
      h(
        'p',
        { class: 'node-error', 'data-role': 'node-error', 'data-error-class': error.code },
        h('strong', { class: 'error-class' }, error.code),
        ' ',
        h('span', { class: 'error-message' }, error.message),
      ),
    );
  }
  const lessons = [...new Set((node.attempts ?? []).flatMap((a) => a.lessons ?? []))];
  const usage = node.usage;
  panel.append(
    h(
      'dl',
      { class: 'facts' },
      // A map's snapshot starts at the entry that found its items settled: its span is explain's.
      ...fact('started', clock(node.map && timing ? timing.startedAt : node.startedAt)),
      ...fact('finished', clock(node.finishedAt)),
      ...fact(
        'took',
        duration(node.map && timing ? timing.durationMs : (node.durationMs ?? timing?.durationMs)),
      ),
      ...(timing
        ? [
            ...fact('queued', duration(timing.queueWaitMs)),
            ...fact('executing', duration(timing.executionMs)),
            ...fact('retry waits', duration(timing.retryWaitMs)),
            ...fact('parked', duration(timing.parkedMs)),
          ]
        : []),
      ...fact(
        'tokens',
        usage ? `${usage.totalTokens} (${usage.promptTokens} in, ${usage.completionTokens} out)` : '—',
      ),
      ...(usage?.costUsd === undefined ? [] : fact('cost', `$${usage.costUsd.toFixed(6)}`)),
      ...fact(
        'lessons',
        lessons.length
          ? h(
              'span',
              { 'data-role': 'lessons' },
              ...lessons.map((id) => h('a', { href: paths.lessons(doc.agentId), class: 'lesson' }, id)),
            )
          : 'none applied',
      ),
      ...(node.until ? fact(node.status === 'retrying' ? 'next attempt' : 'until', clock(node.until)) : []),
    ),
  );
  if (node.attempts?.length) panel.append(h('h3', {}, 'Attempts'), attemptsTable(node.attempts));
  if (node.waits?.length) {
    panel.append(
      h('h3', {}, 'Waits'),
      h(
        'ul',
        { class: 'waits' },
        ...node.waits.map((w) =>
          h(
            'li',
            {},
            h('code', {}, w.signal),
            ` since ${clock(w.since)}, until ${clock(w.until)}`,
            w.approval
              ? ` — approval of ${w.approval.tool}${w.approval.reason ? `: ${w.approval.reason}` : ''}`
              : '',
            w.decidedBy
              ? ` — decided at ${clock(w.decidedBy.at)} by ${w.decidedBy.keyId ?? 'anyone (auth off)'}`
              : '',
          ),
        ),
      ),
    );
  }
  const input = recordedInput(node);
  panel.append(
    h('h3', {}, 'Input'),
    h(
      'div',
      { 'data-role': 'input', 'data-recorded': String(input.recorded) },
      input.recorded ? jsonView(input.value, loadBlob) : h('span', { class: 'muted' }, input.why),
    ),
    h('h3', {}, 'Output'),
    h(
      'div',
      { 'data-role': 'output' },
      'output' in node ? jsonView(node.output, loadBlob) : h('span', { class: 'muted' }, 'none yet'),
    ),
  );
  return panel;
}

function attemptsTable(attempts: readonly Attempt[]): HTMLElement {
  return dataTable(
    { class: 'attempts' },
    ['#', 'started', 'took', 'worker', 'error', 'retry after'],
    h(
      'tbody',
      {},
      ...attempts.map((a) =>
        h(
          'tr',
          {},
          h('td', {}, a.attempt),
          h('td', {}, clock(a.startedAt)),
          h('td', {}, duration(a.durationMs)),
          h('td', {}, a.worker),
          h('td', {}, a.error ? `${a.error.code}: ${a.error.message}` : '—'),
          h('td', {}, a.retryDelayMs === undefined ? '—' : duration(a.retryDelayMs)),
        ),
      ),
    ),
  );
}
