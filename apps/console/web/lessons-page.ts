/**
 * `/console/agents/:agentId/lessons`: what the reflect loop learnt for an agent
 * (`GET /v1/agents/:agentId/lessons`), each lesson with its status, confidence, evidence and effect.
 */
import { unwrap, type TetraloopClient } from '@tetraloop/client';
import { clock, dataTable, describeError, h, show } from './dom.js';
import { goTo, paths } from './routes.js';

export function lessonsPage(
  root: HTMLElement,
  client: TetraloopClient,
  agentId: string,
  fail: (err: unknown) => void,
): void {
  const table = h('tbody');
  const notice = h('p', { class: 'notice', 'data-role': 'notice' });
  show(
    root,
    h(
      'main',
      { class: 'page', 'data-page': 'lessons', 'data-agent-id': agentId },
      h('h1', {}, 'Lessons of ', h('code', {}, agentId)),
      goTo({ name: 'agentId', value: agentId, 'aria-label': 'agent' }, 'Show', paths.lessons),
      notice,
      dataTable(
        { class: 'runs', 'data-role': 'lessons' },
        ['lesson', 'status', 'kind', 'statement', 'scope', 'confidence', 'cases', 'effect', 'updated'],
        table,
      ),
    ),
  );
  client.api
    .GET('/v1/agents/{agentId}/lessons', { params: { path: { agentId } } })
    .then(unwrap)
    .then(
      ({ lessons }) => {
        table.replaceChildren(
          ...lessons.map((l) =>
            h(
              'tr',
              { 'data-lesson-id': l.id, 'data-status': l.status },
              h('td', {}, h('code', {}, l.id)),
              h('td', {}, h('span', { class: `badge lesson-${l.status}` }, l.status)),
              h('td', {}, l.kind),
              h('td', { class: 'task' }, l.statement),
              h(
                'td',
                {},
                Object.entries(l.scope)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(' '),
              ),
              h('td', {}, l.confidence.toFixed(2)),
              h('td', {}, l.cases),
              h('td', {}, l.effect ? JSON.stringify(l.effect) : '—'),
              h('td', {}, clock(l.updatedAt)),
            ),
          ),
        );
        if (lessons.length === 0)
          table.append(h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No lessons yet.')));
      },
      (err: unknown) => {
        fail(err);
        notice.textContent = describeError(err);
      },
    );
}
