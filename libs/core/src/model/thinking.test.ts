import { describe, expect, it } from 'vitest';
import { takesThinking } from './model-config.js';
import { Thinking, thinkingOptions } from './thinking.js';

describe('thinking', () => {
  it('takes an effort or {effort, summary}, and nothing else', () => {
    expect(Thinking.parse('high')).toBe('high');
    expect(Thinking.parse({ effort: 'low', summary: true })).toEqual({ effort: 'low', summary: true });
    expect(Thinking.safeParse('extreme').success).toBe(false);
    expect(Thinking.safeParse({ effort: 'low', budget: 5 }).success).toBe(false);
  });

  it('gives the model call its options, none when nothing is asked', () => {
    expect(thinkingOptions('medium')).toEqual({ effort: 'medium' });
    expect(thinkingOptions({ summary: true })).toEqual({ summary: true });
    expect(thinkingOptions({ summary: false })).toBeUndefined();
    expect(thinkingOptions(undefined)).toBeUndefined();
  });

  it('sends an effort only to the models that take one', () => {
    expect(takesThinking({}, 'o3-mini')).toBe(true);
    expect(takesThinking({}, 'gpt-5')).toBe(true);
    expect(takesThinking({}, 'gpt-4o-mini')).toBe(false);
    expect(takesThinking({ thinkingModels: ['qwen3*', 'r1'] }, 'qwen3-32b')).toBe(true);
    expect(takesThinking({ thinkingModels: ['qwen3*', 'r1'] }, 'r1-distill')).toBe(false);
  });
});
