/**
 * How hard a reasoning model thinks, as a run, a session message or a model node asks for it:
 * an effort (`"low"`), or `{effort?, summary?}` where `summary: true` keeps the reasoning text the
 * server returns as the answer's `reasoning`. Sent as the chat completions `reasoning_effort`.
 */
import { z } from 'zod';
import { THINKING_EFFORTS, type ThinkingOptions } from './model-client.js';

const Effort = z.enum(THINKING_EFFORTS);

export const Thinking = z.union([
  Effort,
  z.strictObject({
    /** `reasoning_effort`; the model's own default when absent. */
    effort: Effort.optional(),
    /** Keep the reasoning the server returns as the answer's `reasoning`. @defaultValue false */
    summary: z.boolean().optional(),
  }),
]);
export type Thinking = z.infer<typeof Thinking>;

/** The options a model call takes for `thinking`; undefined when it asks for nothing. Pure. */
export function thinkingOptions(thinking: Thinking | undefined): ThinkingOptions | undefined {
  if (thinking === undefined) return undefined;
  if (typeof thinking === 'string') return { effort: thinking };
  if (thinking.effort === undefined && !thinking.summary) return undefined;
  return {
    ...(thinking.effort !== undefined ? { effort: thinking.effort } : {}),
    ...(thinking.summary ? { summary: true } : {}),
  };
}
