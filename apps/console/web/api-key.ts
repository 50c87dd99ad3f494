/**
 * The API key the person gives the console. Kept in `sessionStorage` — for this tab, gone when it
 * closes — and never in a URL or a cookie: a cookie would be sent by the browser on its own (and a
 * URL is logged and shared), while the key goes only where the console's calls send it, as
 * `Authorization: Bearer`. With auth off the API needs none and the console never asks.
 */
import { TetraloopApiError, TetraloopClient } from '@tetraloop/client';
import { form, h, show } from './dom.js';

const STORAGE_KEY = 'tetraloop.apiKey';

export const savedKey = (): string | undefined => sessionStorage.getItem(STORAGE_KEY) ?? undefined;
export const forgetKey = (): void => sessionStorage.removeItem(STORAGE_KEY);

export function connect(): TetraloopClient {
  return new TetraloopClient({ baseUrl: location.origin, token: savedKey() });
}

export const isUnauthorized = (err: unknown): boolean =>
  err instanceof TetraloopApiError && err.status === 401;

/**
 * Whether the API takes this tab's key (or no key, with auth off). Only a `401` asks for a key: a
 * key that lacks a scope is still the person's key, and each page says what it may not read.
 */
export async function admitted(client: TetraloopClient): Promise<boolean> {
  try {
    await client.list({ limit: 1 });
    return true;
  } catch (err) {
    if (isUnauthorized(err)) return false;
    throw err;
  }
}

/** Asks for a key; `done` runs once one is stored. */
export function askForKey(root: HTMLElement, refused: boolean, done: () => void): void {
  const input = h('input', {
    type: 'password',
    name: 'key',
    autocomplete: 'off',
    required: true,
    placeholder: 'tl_…',
    'aria-label': 'API key',
  });
  const keyForm = form(
    {
      'data-role': 'api-key',
      class: 'card key-form',
    },
    () => {
      sessionStorage.setItem(STORAGE_KEY, input.value.trim());
      done();
    },
    h('h1', {}, 'Tetraloop console'),
    h(
      'p',
      {},
      refused
        ? 'The API refused that key. Give another one.'
        : 'The API asks for a key. It is kept for this tab only, and sent only to this API.',
    ),
    input,
    h('button', { type: 'submit' }, 'Use this key'),
  );
  show(root, keyForm);
  input.focus();
}
