import { describe, expect, it } from 'vitest';
import {
  CostDay,
  DEFAULT_MODEL_PRICES,
  ModelPrices,
  PriceTable,
  costDay,
  costOf,
  nanoFromUsd,
  usdFromNano,
} from './price-table.js';

describe('the price table', () => {
  it('prices every default model in integer nano-dollars per token', () => {
    const table = new PriceTable();
    expect(table.models()).toEqual(Object.keys(DEFAULT_MODEL_PRICES).sort());
    expect(table.priceOf('gpt-4o-mini')).toEqual({
      model: 'gpt-4o-mini',
      input: 150,
      cachedInput: 75,
      output: 600,
    });
    // 0.275 × 1000 is 275.00000000000006 in floating point: the table holds the integer.
    expect(table.priceOf('o4-mini')?.cachedInput).toBe(275);
    for (const model of table.models()) {
      const p = table.priceOf(model)!;
      for (const v of [p.input, p.cachedInput, p.output]) expect(Number.isInteger(v)).toBe(true);
    }
  });

  it('merges overrides over the defaults model by model; null takes a price away', () => {
    const table = new PriceTable({
      'gpt-4o': { input: 3, output: 12 },
      'local-llama': { input: 0, output: 0 },
      'gpt-4o-mini': null,
    });
    expect(table.priceOf('gpt-4o')).toEqual({
      model: 'gpt-4o',
      input: 3000,
      cachedInput: 3000,
      output: 12000,
    });
    expect(table.priceOf('local-llama')).toMatchObject({ input: 0, output: 0 });
    expect(table.priceOf('gpt-4o-mini')).toBeUndefined();
    expect(table.priceOf('gpt-4.1')).toBeDefined();
  });

  it('prices a dated snapshot as its model unless it has a price of its own', () => {
    const table = new PriceTable({ 'gpt-4o-2024-05-13': { input: 5, output: 15 } });
    expect(table.priceOf('gpt-4o-2024-08-06')?.model).toBe('gpt-4o');
    expect(table.priceOf('gpt-4o-2024-05-13')?.model).toBe('gpt-4o-2024-05-13');
    expect(table.priceOf('unknown-model')).toBeUndefined();
  });

  it('refuses a bad price naming the field', () => {
    const bad = ModelPrices.safeParse({ 'gpt-4o': { input: -1, output: 2 }, x: { input: 1 } });
    expect(bad.success).toBe(false);
    const paths = bad.error!.issues.map((i) => i.path.join('.'));
    expect(paths).toContain('gpt-4o.input');
    expect(paths).toContain('x.output');
    expect(ModelPrices.safeParse({ y: { input: 1, output: 1, cached: 1 } }).success).toBe(false);
  });

  it('costs a call exactly: uncached and cached prompt tokens and completion tokens', () => {
    const price = new PriceTable().priceOf('gpt-4o-mini')!;
    // 1,234 prompt tokens (200 cached) and 567 completion tokens at $0.15 / $0.075 / $0.60 per M.
    const nano = costOf(price, { promptTokens: 1234, cachedPromptTokens: 200, completionTokens: 567 });
    expect(nano).toBe(1034 * 150 + 200 * 75 + 567 * 600);
    expect(usdFromNano(nano)).toBeCloseTo(0.0005103, 12);
    // Cached tokens are never more than the prompt, nor negative.
    expect(costOf(price, { promptTokens: 10, cachedPromptTokens: 50, completionTokens: 0 })).toBe(10 * 75);
    expect(costOf(price, { promptTokens: 10, cachedPromptTokens: -5, completionTokens: 0 })).toBe(10 * 150);
  });

  it('sums to the exact total where dollars in floating point would drift', () => {
    const price = new PriceTable().priceOf('gpt-4.1-nano')!;
    let nano = 0;
    let usd = 0;
    for (let i = 0; i < 1000; i++) {
      nano += costOf(price, { promptTokens: 7, completionTokens: 3 });
      usd += (7 * 0.1 + 3 * 0.4) / 1e6;
    }
    expect(nano).toBe(1000 * (7 * 100 + 3 * 400));
    expect(usd).not.toBe(usdFromNano(nano));
    expect(nanoFromUsd(usdFromNano(nano))).toBe(nano);
  });

  it('books a call under its UTC day, and checks days', () => {
    expect(costDay(new Date('2026-03-01T23:59:59.999-05:00'))).toBe('2026-03-02');
    expect(CostDay.safeParse('2026-02-28').success).toBe(true);
    expect(CostDay.safeParse('2026-02-30').success).toBe(false);
    expect(CostDay.safeParse('2026-2-3').success).toBe(false);
  });
});
