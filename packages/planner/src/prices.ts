import { z } from 'zod';
import { ErrorCode, validate, type ProviderKind } from '@agentmesh/protocol';
import { modelGlobMatches } from './util.js';
import type { TokenUsage } from './providers/types.js';

/** USD per million tokens. Cached and reasoning prices default to the input and output prices. */
export const PriceSchema = z
  .object({
    input_per_mtok: z.number().min(0),
    output_per_mtok: z.number().min(0),
    /** Input read from the prompt cache. */
    cache_read_per_mtok: z.number().min(0).optional(),
    /** Input written to the prompt cache (Anthropic: 1.25x input for the 5-minute cache). */
    cache_write_per_mtok: z.number().min(0).optional(),
    /** Reasoning output tokens, where they are priced apart. */
    reasoning_per_mtok: z.number().min(0).optional(),
    /** The date the price was read off the provider's page (YYYY-MM-DD). */
    as_of: z.string().optional(),
  })
  .strict();
export type Price = z.infer<typeof PriceSchema>;
/** Keys are `provider:model-glob` or a bare `model-glob` (any provider). */
export type PriceTableInput = Record<string, Price>;

/** List prices at the time of writing; configuration (`prices:`) extends and overrides them. */
const openai = (input: number, output: number, cached: number): Price => ({
  input_per_mtok: input,
  output_per_mtok: output,
  cache_read_per_mtok: cached,
  as_of: '2025-11-01',
});
const anthropic = (input: number, output: number): Price => ({
  input_per_mtok: input,
  output_per_mtok: output,
  cache_read_per_mtok: input / 10,
  cache_write_per_mtok: input * 1.25,
  as_of: '2025-11-01',
});
const listed = (input: number, output: number, cached?: number): Price => ({
  input_per_mtok: input,
  output_per_mtok: output,
  ...(cached === undefined ? {} : { cache_read_per_mtok: cached }),
  as_of: '2025-11-01',
});
const free: Price = { input_per_mtok: 0, output_per_mtok: 0 };

/** OpenAI prices hold for both of its APIs (Chat Completions and Responses). */
const OPENAI_PRICES: Readonly<PriceTableInput> = {
  'gpt-4o-mini*': openai(0.15, 0.6, 0.075),
  'gpt-4o*': openai(2.5, 10, 1.25),
  'gpt-4.1-nano*': openai(0.1, 0.4, 0.025),
  'gpt-4.1-mini*': openai(0.4, 1.6, 0.1),
  'gpt-4.1*': openai(2, 8, 0.5),
  'gpt-5-nano*': openai(0.05, 0.4, 0.005),
  'gpt-5-mini*': openai(0.25, 2, 0.025),
  'gpt-5*': openai(1.25, 10, 0.125),
  'o3-mini*': openai(1.1, 4.4, 0.55),
  'o4-mini*': openai(1.1, 4.4, 0.275),
  'o3*': openai(2, 8, 0.5),
};

/** List prices at the time of writing (`as_of`); configuration (`prices:`) extends and overrides them. */
export const DEFAULT_PRICES: Readonly<PriceTableInput> = {
  ...Object.fromEntries(Object.entries(OPENAI_PRICES).map(([glob, p]) => [`openai:${glob}`, p])),
  ...Object.fromEntries(Object.entries(OPENAI_PRICES).map(([glob, p]) => [`openai-responses:${glob}`, p])),
  'anthropic:claude-opus-4-5*': anthropic(5, 25),
  'anthropic:claude-opus-4-6*': anthropic(5, 25),
  'anthropic:claude-opus-4-7*': anthropic(5, 25),
  'anthropic:claude-opus-4*': anthropic(15, 75),
  'anthropic:claude-sonnet-4*': anthropic(3, 15),
  'anthropic:claude-3-7-sonnet*': anthropic(3, 15),
  'anthropic:claude-haiku-4-5*': anthropic(1, 5),
  'anthropic:claude-3-5-haiku*': anthropic(0.8, 4),
  'deepseek:deepseek-chat*': listed(0.28, 0.42, 0.028),
  'deepseek:deepseek-reasoner*': listed(0.28, 0.42, 0.028),
  'groq:llama-3.3-70b-versatile*': listed(0.59, 0.79),
  'groq:llama-3.1-8b-instant*': listed(0.05, 0.08),
  'groq:openai/gpt-oss-120b*': listed(0.15, 0.75),
  'together:meta-llama/Llama-3.3-70B-Instruct-Turbo*': listed(0.88, 0.88),
  'together:deepseek-ai/DeepSeek-V3*': listed(1.25, 1.25),
  'openrouter:openai/gpt-4o-mini*': listed(0.15, 0.6, 0.075),
  'openrouter:anthropic/claude-sonnet-4*': listed(3, 15, 0.3),
  'ollama:*': free,
  'lmstudio:*': free,
  'scripted:*': free,
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

  /**
   * The cost of one response. Cached input is priced at the cache read/write prices and reasoning output at the
   * reasoning price (each defaults to the plain input or output price).
   */
  cost(price: Price | undefined, usage: TokenUsage): number | undefined {
    if (price === undefined) return undefined;
    const read = usage.cache_read_tokens ?? 0;
    const write = usage.cache_write_tokens ?? 0;
    const reasoning = usage.reasoning_tokens ?? 0;
    const plainInput = Math.max(0, usage.input_tokens - read - write);
    const plainOutput = Math.max(0, usage.output_tokens - reasoning);
    return (
      (plainInput * price.input_per_mtok +
        read * (price.cache_read_per_mtok ?? price.input_per_mtok) +
        write * (price.cache_write_per_mtok ?? price.input_per_mtok) +
        plainOutput * price.output_per_mtok +
        reasoning * (price.reasoning_per_mtok ?? price.output_per_mtok)) /
      1_000_000
    );
  }
}
