import { describe, expect, it } from 'vitest';
import { CapabilityTable, parseCapabilityRules } from './capabilities.js';
import { PriceTable } from './prices.js';
import { LoopDetector } from './loop-detector.js';
import { ToolExposure } from './exposure.js';
import { resolveProvider } from './providers/index.js';
import type { ToolSpec } from '@agentmesh/protocol';

const spec = (name: string, loading: 'always' | 'deferred', description = 'does things'): ToolSpec => ({
  name,
  version: '1',
  description,
  namespace: name.split('.')[0]!,
  input_schema: { type: 'object' },
  safety: {
    read_only: true,
    mutating: false,
    networked: false,
    filesystem: false,
    process: false,
    external_spend: false,
    needs_confirmation: false,
  },
  timeout_ms: 1000,
  retry: { max_attempts: 1, timeout_ms: 1000, retry_on: [], backoff_ms: 0, max_backoff_ms: 0, jitter: 0 },
  idempotent: true,
  loading,
  cpu_bound: false,
  tags: [],
});

describe('capability table', () => {
  it('knows native Anthropic search by model glob, and configuration rows win field by field', () => {
    const shipped = new CapabilityTable();
    expect(shipped.resolve('anthropic', 'claude-opus-4-6').tool_search).toEqual(['bm25', 'regex']);
    expect(shipped.resolve('anthropic', 'claude-3-5-haiku-20241022').tool_search).toEqual([]);
    expect(shipped.resolve('openai', 'gpt-4o').parallel_calls).toBe(true);
    const custom = new CapabilityTable([
      { provider: 'anthropic', model: 'CLAUDE-OPUS-*', tool_search: [], max_tools: 7 },
    ]);
    expect(custom.resolve('anthropic', 'claude-opus-4-6')).toEqual({
      native_tools: true,
      tool_search: [],
      parallel_calls: true,
      max_tools: 7,
    });
    expect(() => parseCapabilityRules([{ provider: 'anthropic', model: '*', tool_serch: [] }])).toThrow(
      /tool_serch/,
    );
  });
});

describe('price table', () => {
  it('prices by provider:glob with configured entries first; unknown models have no cost', () => {
    const prices = new PriceTable({
      'openai:gpt-4o*': { input_per_mtok: 1, output_per_mtok: 2 },
      'my-model': { input_per_mtok: 3, output_per_mtok: 3 },
    });
    expect(
      prices.cost(prices.priceOf('openai', 'gpt-4o-2024'), {
        input_tokens: 1_000_000,
        output_tokens: 500_000,
      }),
    ).toBe(2);
    expect(prices.priceOf('openai-compatible', 'my-model')).toEqual({
      input_per_mtok: 3,
      output_per_mtok: 3,
    });
    expect(prices.priceOf('anthropic', 'claude-sonnet-4-6')).toMatchObject({
      input_per_mtok: 3,
      output_per_mtok: 15,
    });
    expect(
      prices.cost(prices.priceOf('openai-compatible', 'llama3.2'), { input_tokens: 5, output_tokens: 5 }),
    ).toBeUndefined();
  });

  it('answers a configured glob built to backtrack against a long requested model id at once', () => {
    const prices = new PriceTable({ 'openai:*a*a*a*a*a*a*a*a*b': { input_per_mtok: 1, output_per_mtok: 1 } });
    const started = performance.now();
    expect(prices.priceOf('openai', 'a'.repeat(5_000))).toBeUndefined();
    expect(prices.priceOf('openai', 'a'.repeat(5_000) + 'B')).toEqual({
      input_per_mtok: 1,
      output_per_mtok: 1,
    });
    expect(performance.now() - started).toBeLessThan(100);
  });
});

describe('loop detector', () => {
  it('counts identical consecutive calls whatever the key order, and resets on a different call', () => {
    const d = new LoopDetector();
    expect(d.observe('a', { x: 1, y: 2 }).action).toBe('run');
    expect(d.observe('a', { y: 2, x: 1 }).action).toBe('warn');
    expect(d.observe('a', { x: 1, y: 2 }).action).toBe('block');
    expect(d.observe('a', { x: 1, y: 2 })).toEqual({ action: 'skip', count: 4 });
    expect(d.observe('b', { x: 1, y: 2 }).action).toBe('run');
  });
});

describe('tool exposure', () => {
  it('promotes on the next turn, evicts the oldest promoted over budget and over max_tools', () => {
    const long = 'x'.repeat(200);
    const e = new ToolExposure({
      specs: [
        spec('a.one', 'always'),
        spec('d.one', 'deferred', long),
        spec('d.two', 'deferred', long),
        spec('d.three', 'deferred', long),
      ],
      mode: 'client',
      maxTools: 5,
      budgetTokens: 100,
    });
    expect(e.beginTurn().offered).toEqual(['a.one', 'tool_search', 'tool_get']);
    e.promote(['d.one', 'a.one', 'nope']);
    expect(e.isCallable('d.one')).toBe(false);
    expect(e.beginTurn().offered).toEqual(['a.one', 'd.one', 'tool_search', 'tool_get']);
    e.promote(['d.two']);
    const t = e.beginTurn();
    expect(t.offered).toEqual(['a.one', 'd.two', 'tool_search', 'tool_get']);
    expect(t.evicted).toEqual(['d.one']);
    const capped = new ToolExposure({
      specs: [spec('a.one', 'always'), spec('d.one', 'deferred'), spec('d.two', 'deferred')],
      mode: 'client',
      maxTools: 4,
    });
    capped.promote(['d.one', 'd.two']);
    expect(capped.beginTurn()).toMatchObject({
      offered: ['a.one', 'd.two', 'tool_search', 'tool_get'],
      evicted: ['d.one'],
    });
  });

  it('native mode sends deferred tools with defer_loading and allows those the provider surfaced', () => {
    const e = new ToolExposure({
      specs: [spec('a.one', 'always'), spec('d.one', 'deferred')],
      mode: 'native',
      nativeVariant: 'bm25',
      maxTools: 100,
    });
    const t = e.beginTurn();
    expect(t.offered).toEqual(['a.one']);
    expect(t.tools.map((x) => [x.name, x.defer_loading ?? false])).toEqual([
      ['a.one', false],
      ['d.one', true],
    ]);
    expect(e.isCallable('d.one')).toBe(false);
    e.surface(['d.one']);
    expect(e.isCallable('d.one')).toBe(true);
  });
});

describe('provider resolution', () => {
  it('reads keys from settings, then the environment, and explains what is missing', () => {
    expect(resolveProvider({}, { env: { OPENAI_API_KEY: 'k' } })).toMatchObject({
      kind: 'openai',
      model: 'gpt-4o-mini',
      apiKey: 'k',
    });
    expect(
      resolveProvider({}, { env: { ANTHROPIC_API_KEY: 'a', ANTHROPIC_BASE_URL: 'http://x' } }),
    ).toMatchObject({ kind: 'anthropic', baseUrl: 'http://x' });
    expect(
      resolveProvider({ provider: 'anthropic', model: 'claude-opus-4-6' }, { anthropicApiKey: 'a', env: {} })
        .model,
    ).toBe('claude-opus-4-6');
    expect(resolveProvider({}, { env: { OPENAI_BASE_URL: 'http://localhost:11434/v1' } }).kind).toBe(
      'openai-compatible',
    );
    expect(() => resolveProvider({ provider: 'anthropic' }, { env: { OPENAI_API_KEY: 'k' } })).toThrow(
      /ANTHROPIC_API_KEY/,
    );
    expect(() => resolveProvider({ provider: 'scripted' }, { env: {} })).toThrow(/script/);
    expect(() => resolveProvider({}, { env: {} })).toThrow(
      expect.objectContaining({ code: 'invalid_config' }),
    );
  });
});
