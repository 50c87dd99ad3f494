/**
 * Example plugin: blocks `http` tool calls to URLs that TETRALOOP_HTTP_DENY_PATTERN (a regular
 * expression, RE2 syntax) matches, before they are made.
 *
 * The pattern is matched, ignoring case, against the URL as the http tool will send it, not as
 * the caller spelt it: its host lower-case, percent-decoded and in IDNA ASCII form (as `new URL`
 * reads it), and also in its Unicode form. So `https://evil%2Ecom/` and `https://EVIL.COM/` are
 * both refused by a deny of `evil\.com`. It runs on a linear-time engine, since the URLs it is
 * matched against are chosen by a model.
 */
import { domainToUnicode } from 'node:url';
import { linearRegex, type LinearRegex } from '../policy/linear-regex.js';
import type { Plugin } from './plugin.js';

/**
 * What a deny rule is matched against: the normalised URL, its host and the host's Unicode form.
 * Empty for what is not a URL (the http tool refuses it on its own).
 */
export function denySubjects(raw: string): string[] {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return [];
  }
  const host = url.hostname;
  return [...new Set([url.href, host, domainToUnicode(host) || host])];
}

/** True when `deny` matches the normalised URL or its host. */
export function deniedUrl(deny: LinearRegex, raw: string): boolean {
  return denySubjects(raw).some((subject) => deny.test(subject));
}

export const register: Plugin = (api) => {
  const pattern = api.env.TETRALOOP_HTTP_DENY_PATTERN;
  if (!pattern) {
    api.logger?.warn('deny-http: TETRALOOP_HTTP_DENY_PATTERN is not set; nothing is blocked');
    return;
  }
  const deny = linearRegex(pattern, { ignoreCase: true });
  api.on(
    'before_tool_call',
    ({ tool, args }) => {
      const url = (args as { url?: unknown } | null)?.url;
      if (tool === 'http' && typeof url === 'string' && deniedUrl(deny, url)) {
        return { block: `URL matches the deny pattern ${pattern}` };
      }
      return undefined;
    },
    { name: 'deny-http', priority: 100 },
  );
};
