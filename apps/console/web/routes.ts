/**
 * The console's pages and their paths (the server answers each with the same shell: see
 * `src/page.ts`). Moving between pages is an ordinary navigation: the shell and its script come
 * back from the browser's cache, and no page keeps state another needs.
 */

import { form, h, type Attrs } from './dom.js';

export type Route =
  | { readonly page: 'runs' }
  | { readonly page: 'run'; readonly runId: string }
  | { readonly page: 'sessions' }
  | { readonly page: 'session'; readonly sessionKey: string }
  | { readonly page: 'lessons'; readonly agentId: string }
  | { readonly page: 'schedules' }
  | { readonly page: 'triggers' }
  | { readonly page: 'missing' };

const BASE = '/console';
const part = (s: string): string => encodeURIComponent(s);

export const paths = {
  runs: (): string => `${BASE}/`,
  run: (runId: string): string => `${BASE}/runs/${part(runId)}`,
  sessions: (): string => `${BASE}/sessions`,
  session: (sessionKey: string): string => `${BASE}/sessions/${part(sessionKey)}`,
  lessons: (agentId: string): string => `${BASE}/agents/${part(agentId)}/lessons`,
  schedules: (): string => `${BASE}/schedules`,
  /** The runs list, searched for the runs a schedule started. */
  scheduleRuns: (scheduleId: string): string => `${BASE}/?${new URLSearchParams({ scheduleId })}`,
  triggers: (): string => `${BASE}/triggers`,
  /** The runs list, searched for the runs a trigger started. */
  triggerRuns: (triggerId: string): string => `${BASE}/?${new URLSearchParams({ triggerId })}`,
};

/** A field and a button that open the page `pathOf` names for what was typed (a session key, an agent). */
export function goTo(field: Attrs, label: string, pathOf: (value: string) => string): HTMLFormElement {
  const input = h('input', { ...field, required: true });
  return form(
    { class: 'filters' },
    () => location.assign(pathOf(input.value.trim())),
    input,
    h('button', { type: 'submit' }, label),
  );
}

export function routeOf(pathname: string): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length).replace(/\/+$/, '') : null;
  if (rest === null) return { page: 'missing' };
  if (rest === '') return { page: 'runs' };
  if (rest === '/sessions') return { page: 'sessions' };
  if (rest === '/schedules') return { page: 'schedules' };
  if (rest === '/triggers') return { page: 'triggers' };
  let m = /^\/runs\/([^/]+)$/.exec(rest);
  if (m) return { page: 'run', runId: decodeURIComponent(m[1]!) };
  m = /^\/sessions\/([^/]+)$/.exec(rest);
  if (m) return { page: 'session', sessionKey: decodeURIComponent(m[1]!) };
  m = /^\/agents\/([^/]+)\/lessons$/.exec(rest);
  if (m) return { page: 'lessons', agentId: decodeURIComponent(m[1]!) };
  return { page: 'missing' };
}
