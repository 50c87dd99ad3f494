/**
 * How hard a reasoning model thinks, as a run, a session message or a model node asks for it:
 * an effort (`"low"`), or `{effort?, summary?}` where `summary: true` keeps the reasoning text the
 * server returns as the answer's `reasoning`. Sent as the chat completions `reasoning_effort`.
 */
import { z } from 'zod';

/** The reasoning efforts the chat completions API takes (`reasoning_effort`). */
export const THINKING_EFFORTS = ['minimal', 'low', 'medium', 'high'] as const;
export type ThinkingEffort = (typeof THINKING_EFFORTS)[number];

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
