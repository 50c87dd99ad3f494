/**
 * What model calls cost: a price table (USD per million tokens, per model) compiled once into
 * integer nano-dollars per token, and the cost of one call's usage in nano-dollars. Integers all
 * the way, so a run's, a session's or a tenant's total is the exact sum of its calls. Pure.
 */
import { z } from 'zod';

/** One model's list price, in USD per million tokens. */
export const ModelPrice = z.strictObject({
  /** Prompt tokens not served from the provider's prompt cache. */
  input: z.number().nonnegative().max(10_000),
  output: z.number().nonnegative().max(10_000),
  /** Prompt tokens served from the prompt cache; `input` when absent. */
  cachedInput: z.number().nonnegative().max(10_000).optional(),
});
export type ModelPrice = z.infer<typeof ModelPrice>;

/**
 * `TETRALOOP_MODEL_PRICES`: model name → its price, merged over {@link DEFAULT_MODEL_PRICES}
 * model by model; `null` takes a default's price away (its calls are then unpriced).
 */
export const ModelPrices = z.record(z.string().min(1).max(200), ModelPrice.nullable());
export type ModelPrices = z.infer<typeof ModelPrices>;

/**
 * OpenAI's list prices (standard tier, USD per million tokens) as of mid-2025. Meant to be
 * overridden: prices change, and discounts, batch or priority tiers and other providers are not here.
 */
export const DEFAULT_MODEL_PRICES: Readonly<Record<string, ModelPrice>> = {
  'gpt-4o': { input: 2.5, cachedInput: 1.25, output: 10 },
  'gpt-4o-mini': { input: 0.15, cachedInput: 0.075, output: 0.6 },
  'gpt-4.1': { input: 2, cachedInput: 0.5, output: 8 },
  'gpt-4.1-mini': { input: 0.4, cachedInput: 0.1, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, cachedInput: 0.025, output: 0.4 },
  o1: { input: 15, cachedInput: 7.5, output: 60 },
  o3: { input: 2, cachedInput: 0.5, output: 8 },
  'o3-mini': { input: 1.1, cachedInput: 0.55, output: 4.4 },
  'o4-mini': { input: 1.1, cachedInput: 0.275, output: 4.4 },
  'gpt-5': { input: 1.25, cachedInput: 0.125, output: 10 },
  'gpt-5-mini': { input: 0.25, cachedInput: 0.025, output: 2 },
  'gpt-5-nano': { input: 0.05, cachedInput: 0.005, output: 0.4 },
};

/** Nano-dollars in a dollar: costs are kept as integers of 10⁻⁹ USD. */
export const NANO_PER_USD = 1_000_000_000;

/** A dollar amount as integer nano-dollars (rounded to the nearest). */
export const nanoFromUsd = (usd: number): number => Math.round(usd * NANO_PER_USD);
/** Integer nano-dollars as dollars. */
export const usdFromNano = (nano: number): number => nano / NANO_PER_USD;

/**
 * One model's price per token in nano-dollars: USD per million tokens × 1000. Exact for prices
 * given to a thousandth of a dollar per million tokens (every list price); finer ones are rounded.
 */
export interface TokenPrice {
  /** The price table's name for the model (a dated snapshot is priced as its model). */
  readonly model: string;
  readonly input: number;
  readonly cachedInput: number;
  readonly output: number;
}

/** What one model call used, as the provider reported it. */
export interface PricedUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Of the prompt tokens, those served from the provider's prompt cache. */
  readonly cachedPromptTokens?: number;
}

const perToken = (usdPerMillion: number): number => Math.round(usdPerMillion * 1000);

/** A dated snapshot (`gpt-4o-2024-08-06`) is priced as its model when it has no price of its own. */
const DATED = /-\d{4}-\d{2}-\d{2}$/;

export class PriceTable {
  private readonly prices: ReadonlyMap<string, TokenPrice>;

  /** The defaults with `overrides` merged over them, model by model (`null` removes one). */
  constructor(
    overrides: ModelPrices = {},
    defaults: Readonly<Record<string, ModelPrice>> = DEFAULT_MODEL_PRICES,
  ) {
    const merged = new Map<string, ModelPrice>(Object.entries(defaults));
    for (const [model, price] of Object.entries(overrides)) {
      if (price === null) merged.delete(model);
      else merged.set(model, price);
    }
    this.prices = new Map(
      [...merged].map(([model, p]) => [
        model,
        {
          model,
          input: perToken(p.input),
          cachedInput: perToken(p.cachedInput ?? p.input),
          output: perToken(p.output),
        },
      ]),
    );
  }

  /** The price of `model`, or undefined when it has none (its calls are unpriced). */
  priceOf(model: string): TokenPrice | undefined {
    return this.prices.get(model) ?? this.prices.get(model.replace(DATED, ''));
  }

  /** The models priced, sorted. */
  models(): string[] {
    return [...this.prices.keys()].sort();
  }
}

/**
 * What one call cost, in integer nano-dollars: uncached prompt tokens at `input`, cached ones at
 * `cachedInput`, completion tokens at `output`. Cached tokens beyond the prompt count as prompt.
 */
export function costOf(price: TokenPrice, usage: PricedUsage): number {
  const cached = Math.min(Math.max(usage.cachedPromptTokens ?? 0, 0), usage.promptTokens);
  return (
    (usage.promptTokens - cached) * price.input +
    cached * price.cachedInput +
    usage.completionTokens * price.output
  );
}

/** The UTC day of `at` as `YYYY-MM-DD`: the day a call's cost is booked under. */
export const costDay = (at: Date): string => at.toISOString().slice(0, 10);

/** A `YYYY-MM-DD` that names a real day. */
export const CostDay = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a day as YYYY-MM-DD')
  .refine((d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && costDay(new Date(`${d}T00:00:00Z`)) === d, {
    message: 'must be a day that exists',
  });
