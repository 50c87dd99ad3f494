/**
 * The API's OpenAPI 3.1 document, generated from the route table, the operation table and the zod
 * schemas the handlers validate and answer with (zod's own JSON Schema output, draft 2020-12: the
 * dialect of OpenAPI 3.1). Served at `GET /openapi.json`; `libs/client` is generated from it.
 */
import { SCOPES } from '@tetraloop/core/domain';
import { z } from 'zod';
import { DEFAULT_MAX_WAIT_MS } from '../max-wait.js';
import { ROUTES, type RouteAccess, type RouteName } from '../route-table.js';
import { TENANT_HEADER } from '../auth.js';
import { ANSWER_SCHEMAS, REQUEST_SCHEMAS, SHOWN_AS, componentRef, registryOf } from './components.js';
import {
  routeOperations,
  type AnswerSpec,
  type OperationSettings,
  type OperationSpec,
  type ParameterSpec,
} from './operations.js';
import { OPEN_OPERATIONS } from './open-operations.js';

type Json = Record<string, unknown>;

/** The document's version: the API package's. */
export const API_VERSION = '0.1.0';

/** Codes any `/v1` route with an API key can answer, by status, beyond its own. */
const KEY_ROUTE_ERRORS: Readonly<Record<number, readonly string[]>> = {
  400: ['invalid_request'],
  401: ['unauthorized'],
  403: ['forbidden'],
  429: ['rate_limited'],
  500: ['internal'],
  503: ['unavailable'],
};
/** Codes the signed webhook route can answer beyond its own (no key, no request rate). */
const SIGNED_ROUTE_ERRORS: Readonly<Record<number, readonly string[]>> = {
  500: ['internal'],
  503: ['unavailable'],
};
/** Codes of the JSON body parser, for routes that take a body. */
const BODY_ERRORS: Readonly<Record<number, readonly string[]>> = {
  400: ['invalid_json', 'json_too_deep'],
  413: ['body_too_large'],
  415: ['unsupported_encoding', 'unsupported_charset'],
};

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: 'Bad request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  406: 'Not acceptable',
  409: 'Conflict',
  413: 'Content too large',
  415: 'Unsupported media type',
  422: 'Unprocessable',
  429: 'Too many requests',
  500: 'Internal error',
  503: 'Unavailable',
};

/** Headers some errors carry. */
const ERROR_HEADERS: Readonly<Record<number, Json>> = {
  401: {
    'WWW-Authenticate': {
      description: '`Bearer realm="tetraloop"` (missing or refused key).',
      schema: { type: 'string' },
    },
  },
  429: { 'Retry-After': { description: 'Seconds until a retry may fit.', schema: { type: 'integer' } } },
  503: { 'Retry-After': { description: 'Seconds until a retry.', schema: { type: 'integer' } } },
};

/** `{path}` for each Express `:param`. */
export const openApiPath = (expressPath: string): string => expressPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function merge(...tables: Readonly<Record<number, readonly string[]>>[]): Map<number, string[]> {
  const out = new Map<number, string[]>();
  for (const table of tables) {
    for (const [status, codes] of Object.entries(table)) {
      const list = out.get(Number(status)) ?? [];
      for (const code of codes) if (!list.includes(code)) list.push(code);
      out.set(Number(status), list);
    }
  }
  return new Map([...out].sort(([a], [b]) => a - b));
}

/** A JSON Schema of one parameter's value (an optional wrapper's inner schema: `required` says it). */
function parameterSchema(schema: z.ZodType): Json {
  const { $schema: _, ...json } = z.toJSONSchema(schema, {
    io: 'input',
    unrepresentable: 'throw',
    metadata: z.registry(),
  }) as Json;
  return json;
}

const optionalIn = (schema: z.ZodType): boolean => schema.safeParse(undefined).success;

function parameters(op: OperationSpec, access: RouteAccess | undefined): Json[] {
  const out: Json[] = [];
  for (const [name, p] of Object.entries(op.params ?? {}))
    out.push({
      name,
      in: 'path',
      required: true,
      description: p.description,
      schema: parameterSchema(p.schema),
    });
  if (op.query) {
    for (const [name, field] of Object.entries(op.query.schema.shape) as [string, z.ZodType][]) {
      const description = op.query.describe[name];
      if (description === undefined) throw new Error(`query parameter ${name} has no description`);
      out.push({
        name,
        in: 'query',
        required: !optionalIn(field),
        description,
        schema: parameterSchema(field),
      });
    }
  }
  const header = (name: string, p: ParameterSpec): Json => ({
    name,
    in: 'header',
    required: p.required ?? false,
    description: p.description,
    schema: parameterSchema(p.schema),
  });
  for (const [name, p] of Object.entries(op.headers ?? {})) out.push(header(name, p));
  // The root token acts for the tenant this header names.
  if (access !== undefined && access !== 'signature') out.push({ $ref: '#/components/parameters/Tenant' });
  return out;
}

/** The component name of a registered schema; every body and JSON answer has one. */
function nameOf(schemas: Record<string, z.ZodType>, schema: z.ZodType, what: string): string {
  const found = Object.entries(schemas).find(([, s]) => s === schema);
  if (!found) throw new Error(`${what}: its schema is not a named component (components.ts)`);
  return found[0];
}

function answer(spec: AnswerSpec, where: string): Json {
  const headers = Object.fromEntries(
    Object.entries(spec.headers ?? {}).map(([name, description]) => [
      name,
      { description, schema: { type: 'string' } },
    ]),
  );
  const content: Json | undefined = spec.json
    ? { 'application/json': { schema: componentRef(nameOf(ANSWER_SCHEMAS, spec.json, where)) } }
    : spec.anyJson
      ? { 'application/json': { schema: {} } }
      : spec.media
        ? { [spec.media]: { schema: { type: 'string' } } }
        : undefined;
  return {
    description: spec.description,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(content ? { content } : {}),
  };
}

/** An error answer: the error shape, with its `code` one of those listed. */
function errorAnswer(status: number, codes: readonly string[]): Json {
  return {
    description: `${STATUS_TEXT[status] ?? 'Error'}: ${codes.map((c) => `\`${c}\``).join(', ')}.`,
    ...(ERROR_HEADERS[status] ? { headers: ERROR_HEADERS[status] } : {}),
    content: {
      'application/json': {
        schema: {
          allOf: [
            componentRef('ApiError'),
            { properties: { error: { properties: { code: { enum: [...codes] } } } } },
          ],
        },
      },
    },
  };
}

function security(access: RouteAccess): Json[] {
  if (access === 'signature') return [{ webhookSignature: [] }];
  if (access === 'root') return [{ rootToken: [] }];
  return [{ apiKey: [access] }, { rootToken: [] }];
}

function accessNote(access: RouteAccess): string {
  if (access === 'signature') return 'No API key: a signed webhook (`X-Tetraloop-Signature`).';
  if (access === 'root') return 'Root token only (`TETRALOOP_ADMIN_TOKEN`).';
  return `Needs an API key with the scope \`${access}\` (or the root token).`;
}

function operation(name: string, op: OperationSpec, access: RouteAccess | undefined): Json {
  const body = op.body
    ? {
        requestBody: {
          required: op.body.required,
          ...(op.body.description ? { description: op.body.description } : {}),
          content: {
            'application/json': { schema: componentRef(nameOf(REQUEST_SCHEMAS, op.body.schema, name)) },
          },
        },
      }
    : {};
  const errors =
    access === undefined
      ? merge(op.errors)
      : merge(
          access === 'signature' ? SIGNED_ROUTE_ERRORS : KEY_ROUTE_ERRORS,
          op.body ? BODY_ERRORS : {},
          op.errors,
        );
  const responses: Json = {};
  for (const [status, spec] of Object.entries(op.answers)) responses[status] = answer(spec, name);
  for (const [status, codes] of errors) {
    if (responses[status]) throw new Error(`${name}: status ${status} is both an answer and an error`);
    responses[status] = errorAnswer(status, codes);
  }
  const description = [op.description, access === undefined ? undefined : accessNote(access)]
    .filter(Boolean)
    .join('\n\n');
  return {
    operationId: name,
    tags: [op.tag],
    summary: op.summary,
    ...(description ? { description } : {}),
    ...(access === undefined
      ? { security: [] }
      : { security: security(access), 'x-tetraloop-access': access }),
    parameters: parameters(op, access),
    ...body,
    responses,
  };
}

/** Converts every named schema of `schemas` (as input or output), nested named ones as `$ref`s. */
function componentSchemas(schemas: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, Json> {
  const { schemas: converted } = z.toJSONSchema(registryOf(schemas), {
    io,
    unrepresentable: 'throw',
    uri: (id) => `#/components/schemas/${id}`,
    override: (ctx) => {
      const shownAs = SHOWN_AS.get(ctx.zodSchema);
      if (shownAs === undefined) return;
      for (const key of Object.keys(ctx.jsonSchema)) delete (ctx.jsonSchema as Json)[key];
      Object.assign(ctx.jsonSchema, componentRef(shownAs));
    },
  });
  // Each is a schema object of the document, not a document: no `$schema` (the document's
  // `jsonSchemaDialect` says it) and no `$id`.
  return Object.fromEntries(
    Object.entries(converted).map(([id, { $schema: _s, $id: _i, ...schema }]) => [id, schema as Json]),
  );
}

/**
 * The OpenAPI 3.1 document of a deployment (its settings show in a few limits).
 * @defaultValue the settings' defaults: what `libs/client` is generated from
 */
export function openApiDocument(settings: OperationSettings = { maxWaitMs: DEFAULT_MAX_WAIT_MS }): Json {
  const overlap = Object.keys(ANSWER_SCHEMAS).filter((n) => n in REQUEST_SCHEMAS);
  if (overlap.length > 0) throw new Error(`component names used twice: ${overlap.join(', ')}`);
  const ops = routeOperations(settings);
  const paths: Record<string, Json> = {};
  const add = (method: string, path: string, op: Json): void => {
    const at = (paths[openApiPath(path)] ??= {});
    if (at[method]) throw new Error(`${method.toUpperCase()} ${path} is documented twice`);
    at[method] = op;
  };
  for (const [name, route] of Object.entries(ROUTES) as [RouteName, (typeof ROUTES)[RouteName]][]) {
    add(route.method, route.path, operation(name, ops[name], route.access));
  }
  for (const [name, open] of Object.entries(OPEN_OPERATIONS)) {
    add(open.method, open.path, { ...operation(name, open.operation, undefined), ...open.extra });
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Tetraloop API',
      version: API_VERSION,
      description:
        'A distributed runtime for LLM agents. Every `/v1` route needs an API key (`Authorization: Bearer tl_<keyId>_<secret>`) with its scope, or the root token, unless the API runs with `TETRALOOP_AUTH=off`; errors are `{"error": {"code", "message", "issues"?}}`. See docs/api.md.',
    },
    tags: [
      {
        name: 'runs',
        description: 'Runs: submit, read, wait, follow, cancel, resume, signal; large outputs.',
      },
      { name: 'sessions', description: 'Sessions, their lanes and transcripts; event sources.' },
      {
        name: 'a2a',
        description:
          'A2A (Agent2Agent): agent cards and the JSON-RPC endpoint, v1.0 and v0.3 (docs/interop.md#a2a).',
      },
      { name: 'memory', description: 'The reflect loop: feedback, lessons, memory.' },
      { name: 'secrets', description: 'Each tenant’s secrets, write-only.' },
      {
        name: 'webhooks',
        description: 'Outbound webhooks: subscriptions to runs’ events, signing secrets, delivery attempts.',
      },
      { name: 'schedules', description: 'Schedules: runs started on a cron pattern or an interval.' },
      {
        name: 'triggers',
        description: 'Events and the triggers that start runs from them (docs/triggers.md).',
      },
      { name: 'keys', description: 'API keys and tenants.' },
      { name: 'limits', description: 'Flow limits (root token).' },
      { name: 'usage', description: 'What model calls cost: the cost ledger.' },
      { name: 'tools', description: 'The tools graphs may name: built-in, MCP and custom.' },
      {
        name: 'protocols',
        description:
          'Other protocols’ endpoints, mapped onto runs (docs/interop.md): MCP over streamable HTTP at `/mcp`.',
      },
      {
        name: 'langgraph',
        description:
          'LangGraph’s Agent Protocol under `/langgraph`, for `@langchain/langgraph-sdk` (`apiUrl: <base>/langgraph`): assistants are agents, threads sessions, runs runs; the store is each tenant’s. Described compactly (the fields Tetraloop reads and answers). A key may also come as `X-Api-Key`. See docs/interop.md.',
      },
      {
        name: 'operations',
        description: 'Health, readiness, metrics and this document: open, outside `/v1`.',
      },
      {
        name: 'console',
        description:
          'The browser console’s pages and assets: open, outside `/v1` (they hold no data; the page asks for a key and calls `/v1` with it).',
      },
    ],
    paths,
    components: {
      schemas: {
        ...componentSchemas(ANSWER_SCHEMAS, 'output'),
        ...componentSchemas(REQUEST_SCHEMAS, 'input'),
      },
      parameters: {
        Tenant: {
          name: TENANT_HEADER,
          in: 'header',
          required: false,
          description:
            'Root token only: the tenant to act for (default `default`); a key acts for its own tenant.',
          schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9-]{0,39}$' },
        },
      },
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'tl_<keyId>_<secret>',
          description: `An API key of one tenant. Each operation names the scope it needs (${SCOPES.map((s) => `\`${s}\``).join(', ')}).`,
        },
        rootToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            'The operator’s root token (`TETRALOOP_ADMIN_TOKEN`): every scope, in the tenant of `X-Tetraloop-Tenant`; the only credential of root routes.',
        },
        webhookSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Tetraloop-Signature',
          description:
            '`t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>` with the source’s secret (`TETRALOOP_WEBHOOKS`).',
        },
        metricsToken: {
          type: 'http',
          scheme: 'bearer',
          description: '`TETRALOOP_METRICS_TOKEN`, when set.',
        },
      },
    },
  };
}
