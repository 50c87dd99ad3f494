/**
 * An MCP tool's args as its server describes them (a JSON Schema), checked with ajv — the
 * validator the core already uses for `llm` nodes' answer schemas — and wrapped in a zod schema,
 * so that the harness, static validation and the catalog treat the tool like a built-in one.
 * Patterns run on the linear-time engine (RE2): a server's schema cannot hang a worker or the
 * API. A pattern RE2 cannot run (lookaround, backreferences: zod's own email pattern has them) is
 * left out of the static check and to the server, which checks its args itself. Pure.
 */
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { z } from 'zod';
import { linearRegExpEngine, linearRegex } from '../policy/linear-regex.js';

export type JsonSchema = Record<string, unknown>;

/** An args object of any shape: what a tool whose schema is unknown or unusable takes. */
export const AnyArgs = z.record(z.string(), z.unknown());

export interface ArgsSchema {
  /** The args checked against the tool's JSON Schema; each problem at its path below the args. */
  readonly input: z.ZodType<Record<string, unknown>>;
  /** Why the schema could not be used (the args are then left to the server), when it could not. */
  readonly problem?: string;
}

/** Dialects ajv's default class speaks; every other schema is read as draft 2020-12. */
const DRAFT_07 = /json-schema\.org\/draft-0[467]\/schema/;

/** Values of these keywords are data, not schemas: no `pattern` inside them is one. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples']);

const runsOnRe2 = (pattern: string): boolean => {
  try {
    linearRegex(pattern);
    return true;
  } catch {
    return false;
  }
};

/** `schema` without the patterns RE2 cannot run (and the `patternProperties` keyed by one). */
export function withoutForeignPatterns(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutForeignPatterns);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema as Record<string, unknown>)) {
    if (DATA_KEYWORDS.has(key)) out[key] = value;
    else if (key === 'pattern' && typeof value === 'string') {
      if (runsOnRe2(value)) out[key] = value;
    } else if (key === 'patternProperties' && typeof value === 'object' && value !== null) {
      out[key] = Object.fromEntries(
        Object.entries(value as Record<string, unknown>)
          .filter(([p]) => runsOnRe2(p))
          .map(([p, s]) => [p, withoutForeignPatterns(s)]),
      );
    } else out[key] = withoutForeignPatterns(value);
  }
  return out;
}

/** `/a/0/b~1c` → `['a', 0, 'b/c']`. */
function pathOf(pointer: string): (string | number)[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
    .map((s) => (/^(0|[1-9]\d*)$/.test(s) ? Number(s) : s));
}

/** One ajv error as a problem at a path below the args: a missing or unknown property at its own path. */
export function argsIssue(error: ErrorObject): { path: (string | number)[]; message: string } {
  const at = pathOf(error.instancePath);
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'required' && typeof params.missingProperty === 'string')
    return { path: [...at, params.missingProperty], message: 'is required' };
  if (error.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string')
    return { path: [...at, params.additionalProperty], message: 'is not an argument of this tool' };
  return { path: at, message: error.message ?? 'is invalid' };
}

/**
 * Compiles the args schemas of one server's tool list. Each list gets its own ajv instances, so
 * a list that replaces another leaves nothing compiled behind.
 */
export function argsSchemaCompiler(): (schema: JsonSchema) => ArgsSchema {
  const options = {
    strict: false,
    allErrors: true,
    // Formats are the server's to check (ajv knows none without ajv-formats).
    validateFormats: false,
    // `$id`s of different tools' schemas may collide: none is registered.
    addUsedSchema: false,
    logger: false as const,
    code: { regExp: linearRegExpEngine },
  };
  let draft07: Ajv | undefined;
  let draft2020: Ajv2020 | undefined;
  return (schema) => {
    const { $schema: dialect, ...rest } = schema;
    const ajv =
      typeof dialect === 'string' && DRAFT_07.test(dialect)
        ? (draft07 ??= new Ajv(options))
        : (draft2020 ??= new Ajv2020(options));
    let validate: ValidateFunction;
    try {
      validate = ajv.compile(withoutForeignPatterns(rest) as JsonSchema);
    } catch (err) {
      return { input: AnyArgs, problem: err instanceof Error ? err.message : String(err) };
    }
    const input = AnyArgs.superRefine((args, ctx) => {
      if (validate(args)) return;
      for (const error of validate.errors ?? []) {
        const { path, message } = argsIssue(error);
        ctx.addIssue({ code: 'custom', path, message });
      }
    });
    return { input };
  };
}

/**
 * Checks values of any type (a custom tool's output) against a JSON Schema: the problems, each at
 * its path, or none. Schemas that cannot be compiled check nothing.
 */
export function valueChecker(schema: JsonSchema): (value: unknown) => string[] {
  const { input, problem } = argsSchemaCompiler()({ type: 'object', properties: { value: schema } });
  if (problem) return () => [];
  return (value) => {
    const checked = input.safeParse({ value });
    if (checked.success) return [];
    return checked.error.issues.map((i) => `${['output', ...i.path.slice(1)].join('.')}: ${i.message}`);
  };
}
