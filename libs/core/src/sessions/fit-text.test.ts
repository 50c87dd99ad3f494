import { describe, expect, it } from 'vitest';
import { fitText } from './session-service.js';

describe('fitText', () => {
  it('leaves text that fits alone', () => {
    expect(fitText('hello', 5)).toBe('hello');
  });

  it('cuts longer text to the limit, marker included', () => {
    const text = 'x'.repeat(1000);
    const fitted = fitText(text, 100);
    expect(fitted.length).toBeLessThanOrEqual(100);
    const omitted = Number(/…\[truncated (\d+) chars\]$/.exec(fitted)?.[1]);
    expect(fitted.length - `\n…[truncated ${omitted} chars]`.length + omitted).toBe(1000);
  });

  it('never splits a surrogate pair', () => {
    const fitted = fitText('😀'.repeat(100), 50);
    expect(fitted.length).toBeLessThanOrEqual(50);
    expect(fitted).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  });
});
