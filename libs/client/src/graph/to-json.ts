/**
 * A node's fields as the graph's JSON: each reference becomes `{"$ref": "…"}`, everything else
 * what `JSON.stringify` would make of it. What cannot be written down is a problem at its path.
 */
import { refExpression, refInfo, stepProblem } from './ref.js';

/** A problem at a path inside one node (`['args', 'email']`). */
export interface NodeProblem {
  readonly at: readonly (string | number)[];
  readonly message: string;
}

export interface JsonContext {
  /** The builder the node belongs to: a reference to another builder's node is a problem. */
  readonly owner: object;
  /** The id of a node handle (what `g.tool` returns), when `value` is one. */
  readonly handleId: (value: unknown) => string | undefined;
  readonly problems: NodeProblem[];
}

/** `value` as JSON, references written as `{"$ref"}`; problems go to `ctx.problems`. */
export function toJson(value: unknown, at: readonly (string | number)[], ctx: JsonContext): unknown {
  const problem = (message: string): undefined => {
    ctx.problems.push({ at, message });
    return undefined;
  };
  const ref = refInfo(value);
  if (ref) {
    if (ref.owner !== undefined && ref.owner !== ctx.owner)
      problem(`references node "${ref.root}" of another graph`);
    const steps = stepProblem(ref, false);
    if (steps !== undefined) problem(steps);
    return { $ref: refExpression(ref) };
  }
  const handle = ctx.handleId(value);
  if (handle !== undefined) return problem(`a node is not a value: read its output with ${handle}.out`);
  if (typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint')
    return problem(`a ${typeof value} is not a JSON value`);
  if (typeof value !== 'object' || value === null) return value;
  const json = value as { toJSON?: unknown };
  if (typeof json.toJSON === 'function') return toJson((json.toJSON as () => unknown)(), at, ctx);
  if (Array.isArray(value)) return value.map((item, i) => toJson(item, [...at, i], ctx) ?? null);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const converted = toJson(item, [...at, key], ctx);
    if (converted !== undefined) out[key] = converted;
  }
  return out;
}
