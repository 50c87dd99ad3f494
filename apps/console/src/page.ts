/**
 * Where the console lives and the one HTML page every console path answers: the browser code reads
 * the path and draws the page it names, so the shell holds no data and is served without a key.
 */

/** The console's prefix; every page below it is the same shell. */
export const CONSOLE_BASE = '/console';
/** The pages, as Express paths (the browser code has the same table in `web/routes.ts`). */
export const CONSOLE_PAGES = {
  runs: `${CONSOLE_BASE}/`,
  run: `${CONSOLE_BASE}/runs/:runId`,
  sessions: `${CONSOLE_BASE}/sessions`,
  session: `${CONSOLE_BASE}/sessions/:sessionKey`,
  lessons: `${CONSOLE_BASE}/agents/:agentId/lessons`,
  schedules: `${CONSOLE_BASE}/schedules`,
  triggers: `${CONSOLE_BASE}/triggers`,
} as const;
export const CONSOLE_SCRIPT_PATH = `${CONSOLE_BASE}/console.js`;
export const CONSOLE_STYLE_PATH = `${CONSOLE_BASE}/console.css`;

/**
 * Only this origin: the script, the style sheet and the API calls come from here, and nothing is
 * inline (the script styles elements through the CSSOM, which `style-src 'self'` allows).
 */
export const CONSOLE_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const CONSOLE_PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Tetraloop console</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="${CONSOLE_STYLE_PATH}" />
  </head>
  <body>
    <div id="console"></div>
    <script type="module" src="${CONSOLE_SCRIPT_PATH}"></script>
  </body>
</html>
`;
