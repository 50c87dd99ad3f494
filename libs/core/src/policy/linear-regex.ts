/**
 * Regular expressions that outside parties write (a `pattern` in an `llm` node's JSON schema,
 * matched against model output; an operator's deny pattern, matched against URLs a model chose)
 * run on RE2 (re2js, pure JavaScript): matching takes time linear in the input, so no pattern can
 * hang a worker (`^(a+)+$` against `aaaa…b` backtracks for ever in JavaScript's own engine).
 * RE2 has no lookaround and no backreferences; a pattern using them does not compile. Pure.
 */
import { RE2JS } from 're2js';

export interface LinearRegex {
  readonly source: string;
  /** True when the pattern matches anywhere in `input` (as `RegExp.prototype.test`). */
  test(input: string): boolean;
  /** `/source/flags`, as a RegExp prints: ajv tells compiled patterns apart by it. */
  toString(): string;
}

/** Compiles `pattern`; throws (with RE2's reason) when RE2 cannot compile it. */
export function linearRegex(pattern: string, options: { ignoreCase?: boolean } = {}): LinearRegex {
  const compiled = RE2JS.compile(pattern, options.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
  const printed = `/${pattern}/${options.ignoreCase ? 'i' : ''}`;
  return { source: pattern, test: (input) => compiled.test(input), toString: () => printed };
}

/**
 * The engine ajv compiles `pattern` and `patternProperties` with (its `code.regExp` option).
 * The `u` flag ajv passes is RE2's native Unicode mode; `code` is how standalone code would
 * reference it (Tetraloop does not generate standalone validators).
 */
export const linearRegExpEngine = Object.assign(
  (pattern: string, _flags: string): LinearRegex => linearRegex(pattern),
  { code: 'linearRegex' },
);
