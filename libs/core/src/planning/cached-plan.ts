/**
 * What identifies a first plan in the plan cache: everything the planner's answer and its
 * validation depend on. The planner never sees the run's input, only its shape matters (which
 * `input.*` references resolve). Pure.
 */
import { createHash } from 'node:crypto';
import { fingerprintOf } from '../memory/run-summary.js';
import type { WorkspaceFile } from '../workspace/workspace.js';

/** A JSON shape: a type name, the shapes an array's items take, or an object's keys with theirs. */
export type Shape = string | Shape[] | { [key: string]: Shape };

/**
 * The structure of a JSON value with types but not values: `{a: "x", b: [1, 2]}` has the shape
 * `{a: "string", b: ["number"]}`. Object keys are sorted; an array's shape lists the distinct
 * shapes of its items, sorted (`[]` when empty).
 */
export function inputShape(value: unknown): Shape {
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    const items = new Map<string, Shape>();
    for (const item of value as unknown[]) {
      const shape = inputShape(item);
      items.set(JSON.stringify(shape), shape);
    }
    return [...items].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, shape]) => shape);
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return Object.fromEntries(entries.map(([k, v]) => [k, inputShape(v)]));
  }
  return typeof value;
}

/** What a cached first plan is keyed by (beside its agent). */
export interface PlanCacheKeyParts {
  readonly task: string;
  readonly input: unknown;
  readonly toolCatalogVersion: string;
  /** The agent's lessons version; 0 with the reflect loop off. */
  readonly lessonsVersion: number;
  readonly plannerModel: string;
  readonly promptVersion: string;
  readonly overrides: string | undefined;
  /** The agent's workspace files as the planner reads them. */
  readonly workspace: readonly WorkspaceFile[];
  /** The secrets the run grants its planned nodes, sorted: a plan is replayed only under the same grant. */
  readonly secrets: readonly string[];
}

/** The hash a first plan is cached under: 32 hex digits of the SHA-256 of its key's parts. */
export function planCacheHash(parts: PlanCacheKeyParts): string {
  const text = JSON.stringify([
    fingerprintOf({ task: parts.task, graph: null }),
    inputShape(parts.input),
    parts.toolCatalogVersion,
    parts.lessonsVersion,
    parts.plannerModel,
    parts.promptVersion,
    parts.overrides ?? '',
    parts.workspace.map((f) => [f.name, f.content]),
    parts.secrets,
  ]);
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}
