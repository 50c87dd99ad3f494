/**
 * `/console/sessions`: the tenant's sessions with their lanes (`GET /v1/sessions`).
 * `/console/sessions/:key`: one lane (its running run and queued items), its transcript — messages,
 * tool calls and their results, replies, runs — read a page at a time, and a box to send it a
 * message. While the page is open it asks for the lane and the lines after the last one it has
 * every few seconds: a session has no event stream of its own, and its replies come from runs the
 * page does not know of yet.
 */
import type { SessionListing, SessionView, TetraloopClient, TranscriptEntry } from '@tetraloop/client';
import { TetraloopApiError } from '@tetraloop/client';
import { clock, dataTable, describeError, form, h, show, type Child } from './dom.js';
import { goTo, paths } from './routes.js';

const POLL_MS = 2000;
const PAGE_LINES = 200;
const MODES = ['collect', 'followup', 'steer', 'interrupt'] as const;

export function sessionsPage(root: HTMLElement, client: TetraloopClient, fail: (err: unknown) => void): void {
  const table = h('tbody');
  const notice = h('p', { class: 'notice', 'data-role': 'notice' });
  show(
    root,
    h(
      'main',
      { class: 'page', 'data-page': 'sessions' },
      h('h1', {}, 'Sessions'),
      goTo(
        { name: 'sessionKey', placeholder: 'session key', 'aria-label': 'session key' },
        'Open',
        paths.session,
      ),
      notice,
      dataTable(
        { class: 'runs', 'data-role': 'sessions' },
        ['session', 'running', 'queued', 'mode', 'last active'],
        table,
      ),
    ),
  );
  client.sessions.list({ limit: 100 }).then(
    (page) => {
      table.replaceChildren(...page.sessions.map(sessionRow));
      if (page.sessions.length === 0)
        table.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No sessions.')));
    },
    (err: unknown) => {
      fail(err);
      notice.textContent = describeError(err);
    },
  );
}

function sessionRow(s: SessionListing): HTMLElement {
  return h(
    'tr',
    { 'data-session-key': s.sessionKey },
    h('td', {}, h('a', { href: paths.session(s.sessionKey) }, s.sessionKey)),
    h('td', {}, s.running ? h('a', { href: paths.run(s.running) }, s.running.slice(0, 8)) : '—'),
    h('td', {}, String(s.queued.length)),
    h('td', {}, s.mode ?? 'default'),
    h('td', {}, clock(s.lastActiveAt)),
  );
}

export function sessionPage(
  root: HTMLElement,
  client: TetraloopClient,
  sessionKey: string,
  fail: (err: unknown) => void,
): void {
  const lane = h('section', { class: 'card', 'data-role': 'lane' });
  const lines = h('ol', { class: 'transcript', 'data-role': 'transcript', 'data-lines': 0 });
  const more = h('button', { type: 'button', 'data-action': 'more', hidden: true }, 'Load more');
  const notice = h('p', { class: 'notice', 'data-role': 'notice' });
  show(
    root,
    h(
      'main',
      { class: 'page', 'data-page': 'session', 'data-session-key': sessionKey },
      h('h1', {}, 'Session ', h('code', {}, sessionKey)),
      lane,
      messageBox(client, sessionKey, notice, () => void poll()),
      notice,
      h('section', { class: 'card' }, h('h2', {}, 'Transcript'), lines, more),
    ),
  );

  /** The number of the last transcript line shown; undefined before the first. */
  let last: number | undefined;
  /** Whether the shown lines reach the transcript's end (then polling asks for what follows). */
  let atEnd = false;
  let count = 0;

  async function readPage(): Promise<void> {
    const page = await client.sessions.transcript(sessionKey, {
      limit: PAGE_LINES,
      ...(last === undefined ? {} : { after: last }),
    });
    if (page.lines.length > 0) last = page.header.from + page.lines.length - 1;
    lines.append(...page.lines.map(transcriptLine));
    count += page.lines.length;
    lines.setAttribute('data-lines', String(count));
    atEnd = page.header.next === null;
    more.hidden = atEnd;
  }
  more.addEventListener('click', () => void readPage().catch(fail));

  async function poll(): Promise<void> {
    try {
      const view = await client.sessions.get(sessionKey).catch((err: unknown) => {
        if (err instanceof TetraloopApiError && err.status === 404) return undefined;
        throw err;
      });
      show(lane, ...laneView(view));
      if (atEnd || last === undefined) await readPage();
      notice.textContent = '';
    } catch (err) {
      fail(err);
      notice.textContent = describeError(err);
    }
  }
  let timer: number | undefined;
  const loop = async (): Promise<void> => {
    await poll();
    clearTimeout(timer);
    if (lines.isConnected) timer = window.setTimeout(() => void loop(), POLL_MS);
  };
  void loop();
}

function laneView(view: SessionView | undefined): Child[] {
  if (!view)
    return [
      h('p', { class: 'muted', 'data-lane': 'new' }, 'No messages yet: the first one makes the session.'),
    ];
  const queued = view.queued.map((item) =>
    item.kind === 'run'
      ? h('li', {}, 'run ', h('a', { href: paths.run(item.runId) }, item.runId.slice(0, 8)))
      : h('li', {}, `${item.messages} messages to collect`),
  );
  return [
    h(
      'p',
      { 'data-lane': view.running ? 'busy' : 'idle' },
      ...(view.running
        ? ['Running ', h('a', { href: paths.run(view.running), 'data-role': 'running' }, view.running)]
        : ['Idle']),
      ` · mode ${view.mode ?? 'default'} · environment v${view.environmentVersion}`,
    ),
    queued.length
      ? h('ol', { class: 'queued', 'data-role': 'queued' }, ...queued)
      : h('p', { class: 'muted' }, 'Nothing queued.'),
  ];
}

/** One transcript line, by its type (see docs/sessions.md#transcripts). */
function transcriptLine(entry: TranscriptEntry): HTMLElement {
  const e = entry as Record<string, unknown> & { type: string };
  const text = (k: string): string => (typeof e[k] === 'string' ? e[k] : '');
  const runLink = (): Child =>
    typeof e.runId === 'string'
      ? h('a', { href: paths.run(e.runId), class: 'muted' }, ` run ${e.runId.slice(0, 8)}`)
      : null;
  let body: Child[];
  switch (e.type) {
    case 'message':
      body = [
        h('strong', {}, text('role') === 'user' ? 'you' : 'agent'),
        ' ',
        h('span', { class: 'text' }, text('text')),
        runLink(),
      ];
      break;
    case 'tool_call':
      body = [
        h('strong', {}, `→ ${text('name')}`),
        ' ',
        h('code', {}, text('arguments') || text('nodeId')),
        runLink(),
      ];
      break;
    case 'tool_result':
      body = [h('strong', {}, `← ${text('name')}`), ' ', h('code', { class: 'result' }, text('content'))];
      break;
    case 'run':
      body = ['run ', runLink(), ` ${text('status')}`];
      break;
    default:
      body = [h('strong', {}, e.type), ' ', h('code', {}, JSON.stringify(e))];
  }
  return h(
    'li',
    { class: `line line-${e.type}`, 'data-type': e.type, 'data-role': text('role') || undefined },
    ...body,
  );
}

function messageBox(
  client: TetraloopClient,
  sessionKey: string,
  notice: HTMLElement,
  sent: () => void,
): HTMLElement {
  const text = h('textarea', {
    name: 'text',
    rows: 2,
    required: true,
    placeholder: 'a message, or /stop, /new, /reset',
    'aria-label': 'message',
  });
  const mode = h(
    'select',
    { name: 'mode', 'aria-label': 'mode' },
    ...MODES.map((m) => h('option', { value: m }, m)),
  );
  return form(
    {
      class: 'card message',
      'data-role': 'send-message',
    },
    () => {
      const message = text.value.trim();
      if (!message) return;
      client.sessions.send(sessionKey, { text: message, mode: mode.value as (typeof MODES)[number] }).then(
        (answer) => {
          text.value = '';
          notice.textContent = answer.queued
            ? `Queued${'position' in answer ? ` at ${String(answer.position)}` : ''}.`
            : 'Sent.';
          sent();
        },
        (err: unknown) => (notice.textContent = describeError(err)),
      );
    },
    text,
    mode,
    h('button', { type: 'submit' }, 'Send'),
  );
}
