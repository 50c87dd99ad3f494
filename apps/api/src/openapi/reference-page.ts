/**
 * `GET /openapi.json` (the document) and `GET /docs` (a reference page for people: Redoc over the
 * document). Everything the page loads comes from this API: its script is Redoc's standalone
 * bundle, read from the installed `redoc` package, never a CDN, and the page's
 * Content-Security-Policy lets the browser fetch nothing from anywhere else (Redoc's sidebar logo,
 * the one outside URL in its bundle, is refused and not shown).
 */
import { createRequire } from 'node:module';
import type express from 'express';
import { openApiDocument } from './document.js';
import type { OperationSettings } from './operations.js';
import { DOCS_PATH, DOCS_SCRIPT_PATH, OPENAPI_PATH } from './open-operations.js';

const REDOC_BUNDLE = createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js');

/** Only this origin: scripts and the document from here, styled-components' inline styles, Redoc's search worker (a blob). */
export const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Tetraloop API reference</title>
    <style>body { margin: 0; }</style>
  </head>
  <body>
    <redoc spec-url="${OPENAPI_PATH}" hide-hostname="true" expand-responses="200,201,202" path-in-middle-panel="true"></redoc>
    <script src="${DOCS_SCRIPT_PATH}"></script>
  </body>
</html>
`;

/** Mounts the document and its reference page; the document is built once, at its first request. */
export function mountApiReference(app: express.Express, settings: OperationSettings): void {
  let text: string | undefined;
  app.get(OPENAPI_PATH, (_req, res) => {
    text ??= JSON.stringify(openApiDocument(settings));
    res.type('application/json').send(text);
  });
  app.get(DOCS_PATH, (_req, res) => {
    res.set('content-security-policy', DOCS_CONTENT_SECURITY_POLICY).type('html').send(PAGE);
  });
  app.get(DOCS_SCRIPT_PATH, (_req, res) => {
    res.sendFile(REDOC_BUNDLE, { maxAge: '1d' });
  });
}
