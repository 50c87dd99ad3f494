/**
 * The routes outside `/v1`, for the OpenAPI document: open (no API key, no request rate, no Redis
 * needed except `/readyz`'s ping), except `/metrics` when `TETRALOOP_METRICS_TOKEN` is set.
 */
import { Liveness, Readiness } from '../answers.js';
import type { OperationSpec } from './operations.js';

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
};
