/**
 * How the `tetraloop` client commands (`run`, `lessons`, `keys`) reach the API: through
 * @tetraloop/client, with `Authorization: Bearer <token>` when a token is given — `TETRALOOP_API_KEY`
 * for `run` and `lessons`, the root token for `keys`. The client's failures become messages for a
 * person that say what to set.
 */
import {
  TetraloopApiError,
  TetraloopClient,
  TetraloopNotJsonError,
  TetraloopUnreachableError,
} from '@tetraloop/client';

/** Where the API is and what to present to it. */
export interface ApiTarget {
  readonly url: string;
  /** Sent as `Authorization: Bearer <token>` when set. */
  readonly token?: string | undefined;
}

export const DEFAULT_API_URL = 'http://localhost:3000';

/** The API a client command talks to, with `TETRALOOP_API_KEY` as its bearer when that is set. */
export function apiTargetFromEnv(env: NodeJS.ProcessEnv = process.env): ApiTarget {
  const token = env.TETRALOOP_API_KEY?.trim();
  return { url: env.TETRALOOP_API_URL ?? DEFAULT_API_URL, ...(token ? { token } : {}) };
}

/** Where a client command sends its requests and writes what it says. */
export interface ClientIo {
  readonly target: ApiTarget;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/** The environment's API target and this process's stdout and stderr. */
export const processClientIo = (): ClientIo => ({
  target: apiTargetFromEnv(),
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
});

/** The client of a target. */
export const clientOf = (target: ApiTarget): TetraloopClient =>
  new TetraloopClient({ baseUrl: target.url, token: target.token });

/**
 * The API's error answer as a message for a person, with what to do about a 401 or a 403 —
 * `credential` names what the command sends (e.g. `TETRALOOP_API_KEY`).
 */
export function describeApiError(err: TetraloopApiError, credential: string): string {
  const said = `${err.message}${err.issues.map((i) => `\n  ${i.path}: ${i.message}`).join('')}`;
  const hint = authHint(err.status, credential);
  return hint ? `${said}\n${hint}` : said;
}

/**
 * What a command says when a call failed: the API's refusal (see `describeApiError`), or that the
 * API is not there (unreachable: set TETRALOOP_API_URL; not JSON: something else answered).
 * Undefined for any other error, which is a bug to let through.
 */
export function describeFailure(err: unknown, credential: string): string | undefined {
  if (err instanceof TetraloopApiError) return describeApiError(err, credential);
  if (err instanceof TetraloopUnreachableError) return `${err.message}; set TETRALOOP_API_URL`;
  if (err instanceof TetraloopNotJsonError) return err.message;
  return undefined;
}

/** What to do about a refused credential, for a 401 or a 403; undefined otherwise. */
export function authHint(status: number, credential: string): string | undefined {
  if (status === 401) {
    return `not authenticated: set ${credential} to a valid key (the API requires one: TETRALOOP_AUTH=required)`;
  }
  if (status === 403)
    return `forbidden: the credential in ${credential} may not do this (a scope is missing)`;
  return undefined;
}
