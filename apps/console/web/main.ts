/**
 * The console's entry: ask for a key if the API wants one, then draw the page the path names.
 * Any `401` later (a key revoked or expired) forgets the key and asks again.
 */
import { admitted, askForKey, connect, forgetKey, isUnauthorized, savedKey } from './api-key.js';
import { describeError, h, show } from './dom.js';
import { lessonsPage } from './lessons-page.js';
import { paths, routeOf } from './routes.js';
import { runPage } from './run-page.js';
import { runsPage } from './runs-list.js';
import { schedulesPage } from './schedules-page.js';
import { sessionPage, sessionsPage } from './sessions-page.js';
import { triggersPage } from './triggers-page.js';

const root = document.getElementById('console')!;

function nav(): HTMLElement {
  return h(
    'nav',
    { class: 'top' },
    h('a', { href: paths.runs(), class: 'brand' }, 'Tetraloop'),
    h('a', { href: paths.runs() }, 'Runs'),
    h('a', { href: paths.sessions() }, 'Sessions'),
    h('a', { href: paths.schedules() }, 'Schedules'),
    h('a', { href: paths.triggers() }, 'Triggers'),
    h('a', { href: paths.lessons('main') }, 'Lessons'),
    h('a', { href: '/docs' }, 'API reference'),
    savedKey()
      ? h(
          'button',
          {
            type: 'button',
            class: 'link',
            'data-action': 'forget-key',
            onclick: () => {
              forgetKey();
              location.reload();
            },
          },
          'Forget key',
        )
      : null,
  );
}

async function boot(): Promise<void> {
  const client = connect();
  if (!(await admitted(client))) {
    const refused = savedKey() !== undefined;
    forgetKey();
    askForKey(root, refused, () => void boot());
    return;
  }
  let asked = false;
  const fail = (err: unknown): void => {
    if (!isUnauthorized(err) || asked) return;
    asked = true;
    forgetKey();
    askForKey(root, true, () => void boot());
  };
  const page = h('div', { class: 'content' });
  show(root, nav(), page);
  const route = routeOf(location.pathname);
  switch (route.page) {
    case 'runs':
      return runsPage(page, client, fail);
    case 'run':
      return runPage(page, client, route.runId, fail);
    case 'sessions':
      return sessionsPage(page, client, fail);
    case 'session':
      return sessionPage(page, client, route.sessionKey, fail);
    case 'lessons':
      return lessonsPage(page, client, route.agentId, fail);
    case 'schedules':
      return schedulesPage(page, client, fail);
    case 'triggers':
      return triggersPage(page, client, fail);
    case 'missing':
      show(
        page,
        h('main', { class: 'page' }, h('h1', {}, 'No such page'), h('a', { href: paths.runs() }, 'The runs')),
      );
  }
}

boot().catch((err: unknown) =>
  show(root, h('p', { class: 'error', 'data-role': 'boot-error' }, describeError(err))),
);
