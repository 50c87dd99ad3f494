/** What a model call makes of a `thinking` option (the option itself: `domain/thinking.ts`). */
import type { Thinking } from '../domain/thinking.js';
import type { ThinkingOptions } from './model-client.js';

export { Thinking } from '../domain/thinking.js';

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
