import { z } from 'zod';
import { ErrorCode, validate, type ProviderKind } from '@agentmesh/protocol';
import { modelGlobMatches } from './util.js';
import type { TokenUsage } from './providers/types.js';

/** USD per million tokens. */
export const PriceSchema = z
  .object({ input_per_mtok: z.number().min(0), output_per_mtok: z.number().min(0) })
  .strict();
export type Price = z.infer<typeof PriceSchema>;
/** Keys are `provider:model-glob` or a bare `model-glob` (any provider). */
export type PriceTableInput = Record<string, Price>;

/** List prices at the time of writing; configuration (`prices:`) extends and overrides them. */
export const DEFAULT_PRICES: Readonly<PriceTableInput> = {
  'openai:gpt-4o-mini*': { input_per_mtok: 0.15, output_per_mtok: 0.6 },
  'openai:gpt-4o*': { input_per_mtok: 2.5, output_per_mtok: 10 },
  'openai:gpt-4.1-nano*': { input_per_mtok: 0.1, output_per_mtok: 0.4 },
  'openai:gpt-4.1-mini*': { input_per_mtok: 0.4, output_per_mtok: 1.6 },
  'openai:gpt-4.1*': { input_per_mtok: 2, output_per_mtok: 8 },
  'openai:gpt-5-nano*': { input_per_mtok: 0.05, output_per_mtok: 0.4 },
  'openai:gpt-5-mini*': { input_per_mtok: 0.25, output_per_mtok: 2 },
  'openai:gpt-5*': { input_per_mtok: 1.25, output_per_mtok: 10 },
  'openai:o3-mini*': { input_per_mtok: 1.1, output_per_mtok: 4.4 },
  'openai:o4-mini*': { input_per_mtok: 1.1, output_per_mtok: 4.4 },
  'openai:o3*': { input_per_mtok: 2, output_per_mtok: 8 },
  'anthropic:claude-opus-4-5*': { input_per_mtok: 5, output_per_mtok: 25 },
  'anthropic:claude-opus-4-6*': { input_per_mtok: 5, output_per_mtok: 25 },
  'anthropic:claude-opus-4-7*': { input_per_mtok: 5, output_per_mtok: 25 },
  'anthropic:claude-opus-4*': { input_per_mtok: 15, output_per_mtok: 75 },
  'anthropic:claude-sonnet-4*': { input_per_mtok: 3, output_per_mtok: 15 },
  'anthropic:claude-3-7-sonnet*': { input_per_mtok: 3, output_per_mtok: 15 },
  'anthropic:claude-haiku-4-5*': { input_per_mtok: 1, output_per_mtok: 5 },
  'anthropic:claude-3-5-haiku*': { input_per_mtok: 0.8, output_per_mtok: 4 },
  'scripted:*': { input_per_mtok: 0, output_per_mtok: 0 },
};

export function parsePrices(raw: unknown): PriceTableInput {
  return validate(z.record(z.string().min(1), PriceSchema), raw, 'prices', ErrorCode.InvalidConfig);
}

/** Prices by provider and model glob; configured entries are consulted before the shipped ones. */
export class PriceTable {
  private readonly entries: { provider: string | undefined; glob: string; price: Price }[] = [];
  constructor(overrides: PriceTableInput = {}) {
    for (const [key, price] of [
      ...Object.entries(parsePrices(overrides)),
      ...Object.entries(DEFAULT_PRICES),
    ]) {
      const colon = key.indexOf(':');
      this.entries.push(
        colon === -1
          ? { provider: undefined, glob: key, price }
          : { provider: key.slice(0, colon), glob: key.slice(colon + 1), price },
      );
    }
  }

  /** The price of a model, or undefined when the table does not know it (its cost is then not counted). */
  priceOf(provider: ProviderKind, model: string): Price | undefined {
    for (const e of this.entries)
      if ((e.provider === undefined || e.provider === provider) && modelGlobMatches(e.glob, model))
        return e.price;
    return undefined;
  }

  cost(price: Price | undefined, usage: TokenUsage): number | undefined {
    if (price === undefined) return undefined;
    return (
      (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1_000_000
    );
  }
}
