/**
 * The names tools go by in a model's function-calling API. OpenAI accepts `[A-Za-z0-9_-]{1,64}`
 * only, and an MCP tool is `mcp.<server>.<tool>`: each such name is given a function name of that
 * alphabet (dots as `__`, other characters as `_`, cut to 64), unique within the catalog, and the
 * model's calls are mapped back. A name already in the alphabet keeps it (the built-in tools). Pure.
 */
import { createHash } from 'node:crypto';

const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function candidate(name: string): string {
  const plain = name.replaceAll('.', '__').replace(/[^A-Za-z0-9_-]/g, '_');
  if (plain.length <= 64) return plain;
  // Cut, with a hash of the whole name so two long names sharing a head stay apart.
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${plain.slice(0, 55)}_${hash}`;
}

export interface FunctionNames {
  /** The function name a model is shown for tool `name`. */
  readonly toFunction: (name: string) => string;
  /** The tool a model's call names: by its function name, or by the tool's own name. */
  readonly toTool: (functionName: string) => string;
}

export function functionNames(tools: readonly string[]): FunctionNames {
  const forward = new Map<string, string>();
  const taken = new Set(tools.filter((t) => FUNCTION_NAME.test(t)));
  for (const tool of [...tools].sort()) {
    if (FUNCTION_NAME.test(tool)) {
      forward.set(tool, tool);
      continue;
    }
    let name = candidate(tool);
    for (let i = 2; taken.has(name); i++) name = `${candidate(tool).slice(0, 60)}_${i}`;
    taken.add(name);
    forward.set(tool, name);
  }
  const back = new Map([...forward].map(([tool, fn]) => [fn, tool]));
  return {
    toFunction: (name) => forward.get(name) ?? name,
    toTool: (fn) => back.get(fn) ?? fn,
  };
}
