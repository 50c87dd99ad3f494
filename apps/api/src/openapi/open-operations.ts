/**
 * The routes outside `/v1`, for the OpenAPI document: open (no API key, no request rate, no Redis
 * needed except `/readyz`'s ping), except `/metrics` when `TETRALOOP_METRICS_TOKEN` is set.
 */
import { z } from 'zod';
import { CONSOLE_PAGES, CONSOLE_SCRIPT_PATH, CONSOLE_STYLE_PATH } from '@tetraloop/console';
import { WELL_KNOWN_CARD_PATH } from '../a2a/card.js';
import { Liveness, Readiness } from '../answers.js';
import type { OperationSpec, ParameterSpec } from './operations.js';

/** Where the document and its reference page are served. */
export const OPENAPI_PATH = '/openapi.json';
export const DOCS_PATH = '/docs';
/** The reference page's script, served from the installed `redoc` package (no CDN). */
export const DOCS_SCRIPT_PATH = '/docs/redoc.standalone.js';

export interface OpenOperation {
  readonly method: 'get';
  readonly path: string;
  readonly operation: OperationSpec;
  /** Fields of the operation object beyond the generated ones (e.g. its `security`). */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/**
 * A console page: the same shell for every path, which draws the page its path names from the
 * API (with the key the person gives it). A path parameter is read by the page, not by the server.
 */
function consolePage(path: string, summary: string, params?: Record<string, ParameterSpec>): OpenOperation {
  return {
    method: 'get',
    path,
    operation: {
      tag: 'console',
      summary,
      ...(params ? { params } : {}),
      answers: { 200: { description: 'The console’s page (it holds no data).', media: 'text/html' } },
      errors: {},
    },
  };
}

const pageParam = (description: string): ParameterSpec => ({ schema: z.string(), description });

export const OPEN_OPERATIONS: Readonly<Record<string, OpenOperation>> = {
  'health.live': {
    method: 'get',
    path: '/healthz',
    operation: {
      tag: 'operations',
      summary: 'Liveness',
      answers: { 200: { description: 'The process is up.', json: Liveness } },
      errors: {},
    },
  },
  'health.ready': {
    method: 'get',
    path: '/readyz',
    operation: {
      tag: 'operations',
      summary: 'Readiness: Redis answers',
      answers: {
        200: { description: 'Redis answered a ping.', json: Readiness },
        503: { description: 'Redis did not answer.', json: Readiness },
      },
      errors: {},
    },
  },
  metrics: {
    method: 'get',
    path: '/metrics',
    operation: {
      tag: 'operations',
      summary: 'Prometheus metrics',
      description: 'Asks for `TETRALOOP_METRICS_TOKEN` as a bearer token when that is set; open otherwise.',
      answers: { 200: { description: 'The Prometheus text format.', media: 'text/plain' } },
      errors: { 401: ['unauthorized'] },
    },
    extra: { security: [{}, { metricsToken: [] }] },
  },
  'openapi.document': {
    method: 'get',
    path: OPENAPI_PATH,
    operation: {
      tag: 'operations',
      summary: 'This OpenAPI 3.1 document',
      answers: { 200: { description: 'The document.', anyJson: true } },
      errors: {},
    },
  },
  'openapi.reference': {
    method: 'get',
    path: DOCS_PATH,
    operation: {
      tag: 'operations',
      summary: 'The API reference, a page for people (Redoc over this document)',
      answers: { 200: { description: 'The page.', media: 'text/html' } },
      errors: {},
    },
  },
  'openapi.reference-script': {
    method: 'get',
    path: DOCS_SCRIPT_PATH,
    operation: {
      tag: 'operations',
      summary: 'The reference page’s script (Redoc’s standalone bundle)',
      answers: { 200: { description: 'The script.', media: 'text/javascript' } },
      errors: {},
    },
  },
  'console.runs': consolePage(CONSOLE_PAGES.runs, 'Console: the runs, searched and followed live'),
  'console.run': consolePage(CONSOLE_PAGES.run, 'Console: one run, its graph, timeline and nodes', {
    runId: pageParam('The run the page shows.'),
  }),
  'console.sessions': consolePage(CONSOLE_PAGES.sessions, 'Console: the sessions and their lanes'),
  'console.session': consolePage(CONSOLE_PAGES.session, 'Console: one session, its lane and transcript', {
    sessionKey: pageParam('The session the page shows.'),
  }),
  'console.lessons': consolePage(CONSOLE_PAGES.lessons, 'Console: an agent’s lessons', {
    agentId: pageParam('The agent whose lessons the page lists.'),
  }),
  'console.schedules': consolePage(
    CONSOLE_PAGES.schedules,
    'Console: the schedules, paused, resumed, triggered and deleted',
  ),
  'console.triggers': consolePage(CONSOLE_PAGES.triggers, 'Console: the triggers, listed and deleted'),
  'console.script': {
    method: 'get',
    path: CONSOLE_SCRIPT_PATH,
    operation: {
      tag: 'console',
      summary: 'The console’s script (bundled by the API from `apps/console/web`)',
      answers: { 200: { description: 'The script.', media: 'text/javascript' } },
      errors: {},
    },
  },
  'console.style': {
    method: 'get',
    path: CONSOLE_STYLE_PATH,
    operation: {
      tag: 'console',
      summary: 'The console’s style sheet',
      answers: { 200: { description: 'The style sheet.', media: 'text/css' } },
      errors: {},
    },
  },
  'a2a.well-known-card': {
    method: 'get',
    path: WELL_KNOWN_CARD_PATH,
    operation: {
      tag: 'a2a',
      summary: 'The default agent’s A2A Agent Card (agent `main`)',
      description:
        'The same card for every caller: it names agent `main`, its JSON-RPC endpoint `/v1/a2a/main` (which asks for an API key) and the bearer scheme; nothing of any tenant. v1.0 with `A2A-Version: 1.0`, v0.3 without. See docs/interop.md#a2a.',
      answers: { 200: { description: 'The Agent Card.', anyJson: true } },
      errors: {},
    },
  },
};
