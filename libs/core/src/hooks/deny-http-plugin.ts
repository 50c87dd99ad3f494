/**
 * Example plugin: blocks `http` tool calls whose URL matches TETRALOOP_HTTP_DENY_PATTERN (a
 * regular expression), before they are made.
 */
import type { Plugin } from './plugin.js';

export const register: Plugin = (api) => {
  const pattern = api.env.TETRALOOP_HTTP_DENY_PATTERN;
  if (!pattern) {
    api.logger?.warn('deny-http: TETRALOOP_HTTP_DENY_PATTERN is not set; nothing is blocked');
    return;
  }
  const deny = new RegExp(pattern);
  api.on(
    'before_tool_call',
    ({ tool, args }) => {
      const url = (args as { url?: unknown } | null)?.url;
      if (tool === 'http' && typeof url === 'string' && deny.test(url)) {
        return { block: `URL matches the deny pattern ${pattern}` };
      }
      return undefined;
    },
    { name: 'deny-http', priority: 100 },
  );
};
