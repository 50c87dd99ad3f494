export {
  graph,
  type Dependency,
  type GraphBuilder,
  type InputRefs,
  type LlmOptions,
  type LlmText,
  type LooseNodeHandle,
  type NodeHandle,
  type TextValue,
  type ToolOptions,
} from './graph-builder.js';
export { GraphBuildError } from './graph-build-error.js';
export { BUILTIN_TOOLS, type BuiltinToolName } from './graph-checks.js';
export type { AnyRef, Ref, RefBase } from './ref.js';
export type { Arg, ToolArgs, ToolInput, ToolLike, ToolOutput } from './tool-like.js';
