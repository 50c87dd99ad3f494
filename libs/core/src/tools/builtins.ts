import type { EgressPolicy } from './egress-policy.js';
import { httpTool } from './http-tool.js';
import { jsonTool } from './json-tool.js';
import { toolRegistry, type ToolRegistry } from './tool.js';
import { waitTool } from './wait-tool.js';

export interface BuiltinToolOptions {
  readonly egress: EgressPolicy;
}

/** The tools every deployment has: `http`, `json`, `wait`. */
export function builtinTools(options: BuiltinToolOptions): ToolRegistry {
  return toolRegistry([httpTool(options.egress), jsonTool, waitTool]);
}
