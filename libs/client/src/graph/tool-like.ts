/**
 * The types a tool gives the builder: what its args may be (its input, each value also a reference
 * of a fitting type) and what its node's `out` reads (its output). zod is imported for its types
 * only: nothing of it runs in the client.
 */
import type { z } from 'zod';
import type { AnyRef, Ref } from './ref.js';

/**
 * A tool the builder calls by value: what `defineTool` of `@tetraloop/sdk` returns, or any value
 * with a name and zod schemas for its input and output.
 */
export interface ToolLike {
  readonly name: string;
  readonly input: z.ZodType;
  readonly output: z.ZodType;
}

/** What a call of the tool takes: its input schema's input (before defaults), when that is known. */
export type ToolInput<T extends ToolLike> =
  unknown extends z.input<T['input']> ? z.output<T['input']> : z.input<T['input']>;

/** What a node of the tool gives: its output schema's output. */
export type ToolOutput<T extends ToolLike> = z.output<T['output']>;

/** A value where a `T` is taken: the value, a reference to one, or (for objects) fields that are. */
export type Arg<T> = Ref<T> | AnyRef | PlainArg<T>;
type PlainArg<T> = T extends object ? { [K in keyof T]: Arg<T[K]> } : T;

/** The args of a node that calls `T`. */
export type ToolArgs<T extends ToolLike> = PlainArg<ToolInput<T>>;
