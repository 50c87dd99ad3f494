/**
 * The browser console (`apps/console`): one HTML shell for every console path, and its script and
 * style sheet, bundled in this process at their first request (`consoleAssets`). Served open, like
 * `/docs`: none of it holds data — the page asks the person for an API key and sends it with each
 * `/v1` call — and under a Content-Security-Policy that lets the page reach this origin only.
 */
import type express from 'express';
import {
  CONSOLE_CONTENT_SECURITY_POLICY,
  CONSOLE_PAGE,
  CONSOLE_PAGES,
  CONSOLE_SCRIPT_PATH,
  CONSOLE_STYLE_PATH,
  consoleAssets,
} from '@tetraloop/console';

export function mountConsole(app: express.Express): void {
  for (const path of Object.values(CONSOLE_PAGES)) {
    app.get(path, (_req, res) => {
      res
        .set('content-security-policy', CONSOLE_CONTENT_SECURITY_POLICY)
        .set('cache-control', 'no-cache')
        .type('html')
        .send(CONSOLE_PAGE);
    });
  }
  app.get(CONSOLE_SCRIPT_PATH, async (_req, res) => {
    res
      .type('text/javascript')
      .set('cache-control', 'no-cache')
      .send((await consoleAssets()).script);
  });
  app.get(CONSOLE_STYLE_PATH, async (_req, res) => {
    res
      .type('text/css')
      .set('cache-control', 'no-cache')
      .send((await consoleAssets()).style);
  });
}
