/**
 * `/console/runs/:runId`: the run's graph (nodes coloured by status, the critical path marked), a
 * timeline under it, the clicked node's details, and what a person can do — cancel, resume, rerun
 * from a node, decide a wait, send feedback.
 *
 * Live: the page follows the run's event stream with the client's `events()` iterator (fetch, so
 * it sends the key, which `EventSource` cannot; it reconnects with `Last-Event-ID`). An event
 * only says that something changed: the page then reads the run document and its explain again
 * (one read at a time, the next one coalescing every event that came meanwhile), so what it draws
 * is always a state the API stored, never one pieced together from events — with one exception:
 * a custom tool's progress (`node.progress`), which the API does not store anywhere but in the
 * event itself. The page keeps each node's latest report from the events it receives and shows it
 * while the stored document says that node runs (`node-progress.ts`); a progress event is drawn
 * without reading the run again, since it changed nothing stored.
 *
 * A map node is one box whose bar fills as its items are done (the document's `map` counts, which
 * its `map.progress` events announce); clicked, its details page through its items
 * (`map-items.ts`).
 */
import { unwrap, type RunDocument, type RunExplain, type TetraloopClient } from '@tetraloop/client';
import { clock, describeError, duration, form, h, show } from './dom.js';
import { decisionForm } from './decisions.js';
import { nodeDetails, nodeFields } from './node-details.js';
import { progressShown, takeProgress, type NodeProgress, type ProgressReports } from './node-progress.js';
import { mapItemsView, type MapItemsView } from './map-items.js';
import { mapBar, mapProgressOf } from './map-progress.js';
import { graphView } from './run-graph.js';
import { timelineView } from './run-timeline.js';
import { paths } from './routes.js';

const SETTLED_POLL_MS = 3000;

export function runPage(
  root: HTMLElement,
  client: TetraloopClient,
  runId: string,
  fail: (err: unknown) => void,
): void {
  const page = h('main', {
    class: 'page run-page',
    'data-page': 'run',
    'data-run-id': runId,
    'data-run-status': 'loading',
  });
  const header = h('header', { class: 'run-header' });
  const notice = h('p', { class: 'notice', 'data-role': 'notice' });
  const toolbar = h('div', { class: 'actions', 'data-role': 'run-actions' });
  const decisions = h('section', { class: 'decisions', 'data-role': 'decisions' });
  const graph = graphView((id) => select(id));
  const timeline = h('section', { class: 'card' });
  const details = h(
    'div',
    { 'data-role': 'details' },
    h('p', { class: 'muted' }, 'Click a node for its details.'),
  );
  show(
    page,
    header,
    toolbar,
    notice,
    decisions,
    h('section', { class: 'card' }, h('h2', {}, 'Graph'), legend(), graph.element),
    timeline,
    details,
  );
  show(root, page);

  let doc: RunDocument | undefined;
  let explain: RunExplain | undefined;
  let selected: string | undefined;
  /** Each node's latest `node.progress`, from the events: the run document has none. */
  const reports: ProgressReports = new Map();
  const progressOf = (id: string): NodeProgress | undefined =>
    doc ? progressShown(reports.get(id), nodeFields(doc, id)) : undefined;
  /** In the graph, a map node's bar is how many of its items are done. */
  const barOf = (id: string): NodeProgress | undefined => {
    const map = doc && mapProgressOf(doc.nodes[id]);
    return map ? mapBar(map) : progressOf(id);
  };
  /** Each map node's items view, kept across redraws of the details panel (its page stays). */
  const mapViews = new Map<string, MapItemsView>();
  /** What the last drawn parts showed, so a redraw leaves a form or an opened JSON branch alone. */
  let drawn = { details: '', decisions: '', actions: '' };

  const loadBlob = async (hash: string): Promise<unknown> =>
    unwrap(await client.api.GET('/v1/blobs/{hash}', { params: { path: { hash } } }));

  const act = (what: string, call: () => Promise<unknown>) => (): void => {
    notice.textContent = `${what}…`;
    call().then(
      () => {
        notice.textContent = `${what}: done.`;
        drawn = { details: '', decisions: '', actions: '' };
        schedule();
      },
      (err: unknown) => {
        fail(err);
        notice.textContent = `${what}: ${describeError(err)}`;
      },
    );
  };
  const post = (route: '/v1/runs/{id}/cancel' | '/v1/runs/{id}/resume') => async (): Promise<unknown> =>
    unwrap(await client.api.POST(route, { params: { path: { id: runId } } }));

  function select(id: string): void {
    selected = id;
    render();
  }

  function render(): void {
    if (!doc) return;
    page.setAttribute('data-run-status', doc.status);
    page.setAttribute('data-settled', String(doc.finishedAt !== null));
    const critical = explain?.criticalPath.map((n) => n.id) ?? [];
    show(
      header,
      h(
        'h1',
        {},
        'Run ',
        h('code', {}, runId),
        ' ',
        h('span', { class: `badge status-${doc.status}`, 'data-role': 'run-status' }, doc.status),
      ),
      doc.rerunOf
        ? h(
            'p',
            { 'data-role': 'rerun-of' },
            'Rerun of ',
            h('a', { href: paths.run(doc.rerunOf.runId), 'data-role': 'origin' }, doc.rerunOf.runId),
            ` from node ${doc.rerunOf.from}`,
          )
        : null,
      h(
        'p',
        { class: 'muted' },
        `agent `,
        h('a', { href: paths.lessons(doc.agentId) }, doc.agentId),
        doc.sessionKey ? ' · session ' : '',
        doc.sessionKey ? h('a', { href: paths.session(doc.sessionKey) }, doc.sessionKey) : '',
        ` · created ${clock(doc.createdAt)} · started ${clock(doc.startedAt)} · finished ${clock(doc.finishedAt)}`,
        explain
          ? ` · wall ${duration(explain.wallMs)} · critical path ${duration(explain.criticalPathMs)}`
          : '',
        ` · ${doc.usage.toolCalls} tool calls · ${doc.usage.totalTokens} tokens`,
      ),
      doc.error
        ? h(
            'p',
            { class: 'node-error', 'data-role': 'run-error' },
            h('strong', {}, doc.error.code),
            ' ',
            doc.error.message,
          )
        : null,
      doc.task ? h('p', { class: 'task' }, doc.task) : null,
    );
    const actionsKey = JSON.stringify([doc.status, doc.finishedAt]);
    if (actionsKey !== drawn.actions) {
      drawn.actions = actionsKey;
      show(toolbar, ...runActions(doc));
    }
    const waiting = Object.keys(doc.nodes).filter((id) => nodeFields(doc!, id)?.status === 'waiting');
    const decisionsKey = JSON.stringify(waiting.map((id) => [id, nodeFields(doc!, id)?.signal]));
    if (decisionsKey !== drawn.decisions) {
      drawn.decisions = decisionsKey;
      const forms = waiting.map((id) => decisionForm(client, runId, id, nodeFields(doc!, id)!, schedule));
      show(decisions, ...(forms.some(Boolean) ? [h('h2', {}, 'Waiting for a decision'), ...forms] : []));
    }
    graph.update(doc, critical, selected, barOf);
    if (explain) show(timeline, h('h2', {}, 'Timeline'), timelineView(explain, select));
    if (selected) {
      const timing = explain?.nodes.find((n) => n.id === selected);
      const progress = progressOf(selected);
      const map = mapProgressOf(doc.nodes[selected]);
      let mapView = mapViews.get(selected);
      if (map && !mapView)
        mapViews.set(selected, (mapView = mapItemsView(client, runId, selected, loadBlob)));
      if (map) mapView?.update(map, timing?.map);
      const detailsKey = JSON.stringify([selected, doc.nodes[selected], timing, progress, doc.finishedAt]);
      if (detailsKey !== drawn.details) {
        drawn.details = detailsKey;
        const from = selected;
        const rerun = h(
          'button',
          {
            type: 'button',
            'data-action': 'rerun',
            disabled: doc.finishedAt === null,
            title: doc.finishedAt === null ? 'a run can be rerun once it has settled' : undefined,
            onclick: act(`Rerun from ${from}`, async () => {
              const { runId: next } = await client.rerun(runId, from);
              location.assign(paths.run(next));
            }),
          },
          'Rerun from this node',
        );
        const panel = nodeDetails(doc, selected, timing, progress, loadBlob, rerun);
        if (map && mapView) panel.append(mapView.element);
        show(details, panel);
      }
    }
  }

  function runActions(run: RunDocument): HTMLElement[] {
    const out: HTMLElement[] = [];
    if (run.finishedAt === null && (run.status === 'queued' || run.status === 'running')) {
      out.push(
        h(
          'button',
          {
            type: 'button',
            class: 'danger',
            'data-action': 'cancel',
            onclick: act('Cancel', post('/v1/runs/{id}/cancel')),
          },
          'Cancel',
        ),
      );
    }
    if (run.finishedAt !== null && (run.status === 'failed' || run.status === 'timed_out')) {
      out.push(
        h(
          'button',
          { type: 'button', 'data-action': 'resume', onclick: act('Resume', post('/v1/runs/{id}/resume')) },
          'Resume',
        ),
      );
    }
    if (run.finishedAt !== null) out.push(feedbackForm());
    return out;
  }

  function feedbackForm(): HTMLElement {
    const score = h(
      'select',
      { name: 'score', 'aria-label': 'score' },
      h('option', { value: '1' }, 'good (1)'),
      h('option', { value: '0' }, 'neutral (0)'),
      h('option', { value: '-1' }, 'bad (−1)'),
    );
    const comment = h('input', { name: 'comment', placeholder: 'feedback (optional)', maxlength: 2000 });
    return form(
      {
        class: 'feedback',
        'data-role': 'feedback',
      },
      () => {
        act('Feedback', async () =>
          unwrap(
            await client.api.POST('/v1/runs/{id}/feedback', {
              params: { path: { id: runId } },
              body: {
                score: Number(score.value),
                ...(comment.value.trim() ? { comment: comment.value.trim() } : {}),
              },
            }),
          ),
        )();
      },
      score,
      comment,
      h('button', { type: 'submit' }, 'Send feedback'),
    );
  }

  // One read at a time; events that arrive during it ask for one more.
  let reading = false;
  let again = false;
  let following = false;
  function schedule(): void {
    // A page replaced (the key form after a 401) reads nothing more.
    if (!page.isConnected) return;
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    Promise.all([client.get(runId), client.explain(runId)]).then(
      ([d, e]) => {
        doc = d;
        explain = e;
        render();
        done();
        if (doc.finishedAt === null && !following) follow();
      },
      (err: unknown) => {
        fail(err);
        notice.textContent = describeError(err);
        done();
      },
    );
  }
  function done(): void {
    reading = false;
    if (again) {
      again = false;
      schedule();
    }
  }

  function follow(): void {
    following = true;
    void (async () => {
      try {
        for await (const event of client.events(runId)) {
          if (!page.isConnected) break; // closes the stream
          // A progress report changed nothing stored: drawn at once, with no read.
          if (takeProgress(reports, event) && event.type === 'node.progress') render();
          else schedule();
        }
      } catch (err) {
        // The stream could not be kept (the tenant's stream cap, a lost key): read the run on a timer instead.
        fail(err);
        notice.textContent = `live updates paused: ${describeError(err)}`;
        await new Promise((resolve) => setTimeout(resolve, SETTLED_POLL_MS));
      }
      following = false;
      schedule();
    })();
  }

  schedule();
}

function legend(): HTMLElement {
  const statuses = [
    'pending',
    'queued',
    'running',
    'retrying',
    'throttled',
    'waiting',
    'succeeded',
    'failed',
    'skipped',
    'cancelled',
  ];
  return h(
    'p',
    { class: 'legend' },
    ...statuses.map((s) => h('span', { class: `badge status-${s}` }, s)),
    h('span', { class: 'badge critical' }, 'critical path'),
  );
}
