/**
 * Flow limits: how fast calls may reach outside services. A limit names a key expression over the
 * call and its run (`model`, `host`, `tool`, `tenant`, `agent`, `run.metadata.<field>`), and caps
 * the calls in flight per value of that key (`concurrency`), the calls per interval
 * (`rate.requests`) and the model tokens per interval (`rate.tokens`). Pure: the definitions, their
 * validation and which keys a call falls under; `state/flow-store.ts` counts in Redis and
 * `executor/flow-gate.ts` holds calls back.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

/** What a limit (or its fair-share grouping) is keyed by. */
export const KeyExpression = z.union([
  z.enum(['model', 'host', 'tool', 'tenant', 'agent']),
  z
    .string()
    .regex(
      /^run\.metadata\.[A-Za-z0-9_-]{1,64}$/,
      'must be model, host, tool, tenant, agent or run.metadata.<field>',
    ),
]);
export type KeyExpression = z.infer<typeof KeyExpression>;

/** The longest interval of a rate limit: a day. */
export const MAX_INTERVAL_MS = 86_400_000;

export const RateLimit = z
  .strictObject({
    /** Calls per interval. */
    requests: z.number().int().positive().max(10_000_000).optional(),
    /** Model tokens (prompt + completion) per interval; tool calls count none. */
    tokens: z.number().int().positive().max(10_000_000_000).optional(),
    /** @defaultValue 60000 (a minute) */
    intervalMs: z.number().int().min(100).max(MAX_INTERVAL_MS).default(60_000),
  })
  .refine((r) => r.requests !== undefined || r.tokens !== undefined, {
    message: 'give requests, tokens or both',
  });
export type RateLimit = z.infer<typeof RateLimit>;

export const LimitDefinition = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}'),
    key: KeyExpression,
    /** Only calls whose key has one of these values; every value counts on its own when omitted. */
    match: z
      .union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).min(1).max(100)])
      .optional(),
    /** Calls in flight at once, per value of the key. */
    concurrency: z.number().int().positive().max(100_000).optional(),
    rate: RateLimit.optional(),
    /** Waiting calls are served round-robin across the values of this key. @defaultValue "tenant" */
    fairBy: KeyExpression.default('tenant'),
    /** A `429` from the service lowers this limit for a while and `Retry-After` pauses it. @defaultValue true */
    adaptive: z.boolean().default(true),
  })
  .refine((l) => l.concurrency !== undefined || l.rate !== undefined, {
    message: 'give concurrency, rate or both',
  });
export type LimitDefinition = z.infer<typeof LimitDefinition>;

/** Most limits one deployment may declare. */
export const MAX_LIMITS = 100;

/** The limits of a deployment: `{"limits": [...]}` (`TETRALOOP_LIMITS`, `PUT /v1/limits`). */
export const LimitsDocument = z
  .strictObject({ limits: z.array(LimitDefinition).max(MAX_LIMITS) })
  .superRefine((doc, ctx) => {
    const seen = new Set<string>();
    doc.limits.forEach((limit, i) => {
      if (seen.has(limit.name))
        ctx.addIssue({
          code: 'custom',
          path: ['limits', i, 'name'],
          message: `"${limit.name}" is declared twice`,
        });
      seen.add(limit.name);
    });
  });
export type LimitsDocument = z.infer<typeof LimitsDocument>;

export const NO_LIMITS: LimitsDocument = { limits: [] };

/** A call as flow control sees it: what it is, whose run it serves and how much it may cost. */
export interface FlowCall {
  readonly tool: string;
  /** Model calls: the model. */
  readonly model?: string;
  /** Calls with a URL: its host. */
  readonly host?: string;
  readonly tenant: string;
  readonly agent: string;
  readonly metadata: Readonly<Record<string, unknown>> | null;
  /** Model calls: the tokens reserved (estimated prompt + most completion tokens). */
  readonly tokens: number;
}

/** One counter a call falls under: a limit and a value of its key. */
export interface FlowKey {
  /** `<limit name>=<value>` (a long value hashed), unique per counter. */
  readonly id: string;
  readonly limit: string;
  readonly concurrency: number;
  readonly requests: number;
  readonly tokens: number;
  readonly intervalMs: number;
  readonly adaptive: boolean;
  /** Keyed by the service called (model, host or tool): a `429` from it adapts this counter. */
  readonly service: boolean;
  /** The call's fair-share group among this counter's waiters (the value of the limit's `fairBy`). */
  readonly group: string;
}

/** The value of `expression` for `call`, or undefined when the call has none. */
export function valueOf(expression: KeyExpression, call: FlowCall): string | undefined {
  switch (expression) {
    case 'model':
      return call.model;
    case 'host':
      return call.host;
    case 'tool':
      return call.tool;
    case 'tenant':
      return call.tenant;
    case 'agent':
      return call.agent;
    default: {
      const field = expression.slice('run.metadata.'.length);
      const value = call.metadata?.[field];
      return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
        ? String(value)
        : undefined;
    }
  }
}

/** Values go into Redis key names: long or odd ones are hashed. */
const keyPart = (value: string): string =>
  /^[A-Za-z0-9_.:@/-]{1,128}$/.test(value)
    ? value
    : `#${createHash('sha256').update(value).digest('hex').slice(0, 32)}`;

/** The counters `call` falls under, in declaration order. */
export function flowKeysFor(doc: LimitsDocument, call: FlowCall): FlowKey[] {
  const keys: FlowKey[] = [];
  for (const limit of doc.limits) {
    const value = valueOf(limit.key, call);
    if (value === undefined) continue;
    if (limit.match !== undefined) {
      const allowed = typeof limit.match === 'string' ? [limit.match] : limit.match;
      if (!allowed.includes(value)) continue;
    }
    keys.push({
      id: `${limit.name}=${keyPart(value)}`,
      limit: limit.name,
      concurrency: limit.concurrency ?? 0,
      requests: limit.rate?.requests ?? 0,
      tokens: limit.rate?.tokens ?? 0,
      intervalMs: limit.rate?.intervalMs ?? 60_000,
      adaptive: limit.adaptive,
      service: limit.key === 'model' || limit.key === 'host' || limit.key === 'tool',
      group: keyPart(valueOf(limit.fairBy, call) ?? '-'),
    });
  }
  return keys;
}

/** Run priorities: 1 (lowest) to 10 (highest). */
export const Priority = z.number().int().min(1).max(10);
/** @defaultValue 5 */
export const DEFAULT_PRIORITY = 5;

/**
 * Tokens a model call reserves before it is made: its prompt estimated from its characters (about
 * four per token, rounded up generously to three) plus the most completion tokens it may use.
 */
export function reservedTokens(promptChars: number, maxCompletionTokens: number): number {
  return Math.ceil(promptChars / 3) + maxCompletionTokens;
}

/** `TETRALOOP_LIMITS`: JSON, or the path of a JSON file. */
export function parseLimitsSetting(text: string, readFile: (path: string) => string): unknown {
  const trimmed = text.trim();
  if (trimmed === '') return NO_LIMITS;
  const json = trimmed.startsWith('{') || trimmed.startsWith('[') ? trimmed : readFile(trimmed);
  const parsed = JSON.parse(json) as unknown;
  // A bare array is the list of limits.
  return Array.isArray(parsed) ? { limits: parsed } : parsed;
}
