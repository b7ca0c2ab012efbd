import { describe, expect, it, vi } from 'vitest';
import { ToolSpecSchema, type ToolSpec } from '@agentmesh/protocol';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  SpecTexts,
  ToolRegistry,
  canonicalJson,
  compareVersions,
  encodeRecord,
  specCanonicalJson,
  specHash,
} from './registry.js';
import { RETRY_KEYS, SAFETY_KEYS, SPEC_KEYS } from './canonical.js';

const spec = (version: string, description: string) =>
  ToolSpecSchema.parse({
    name: 'json.format',
    version,
    description,
    namespace: 'json',
    input_schema: { type: 'object', properties: { b: { type: 'string' }, a: { type: 'number' } } },
    safety: {},
    timeout_ms: 1000,
    retry: { max_attempts: 1, timeout_ms: 1000, retry_on: [], backoff_ms: 0, max_backoff_ms: 0, jitter: 0 },
    idempotent: true,
    loading: 'deferred',
  });
const record = (
  worker_id: string,
  tools: { hash: string; spec: ReturnType<typeof spec>; since?: number }[],
) => ({
  worker_id,
  ttl_ms: 1000,
  registered_at: 'now',
  tools,
});

describe('ToolRegistry', () => {
  it('hashes specs canonically, whatever the key order', () => {
    const a = spec('1', 'x');
    const reordered = JSON.parse(
      JSON.stringify({
        ...a,
        input_schema: { properties: { a: { type: 'number' }, b: { type: 'string' } }, type: 'object' },
      }),
    );
    expect(specHash(reordered)).toBe(specHash(a));
    expect(canonicalJson({ b: 1, a: [1, { d: 2, c: undefined }] })).toBe('{"a":[1,{"d":2}],"b":1}');
  });

  it('writes canonical JSON: sorted keys at every depth, JSON escapes, nulls for holes, stable hashes', () => {
    const value = {
      'z"q': ['é\n', undefined, { y: null, x: [true, 1.5, 'a\u0000'] }],
      '10': { b: 'B', a: { '': 0 } },
      '9': -0,
    };
    expect(canonicalJson(value)).toBe(
      '{"10":{"a":{"":0},"b":"B"},"9":0,"z\\"q":["é\\n",null,{"x":[true,1.5,"a\\u0000"],"y":null}]}',
    );
    expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
    expect(specHash(spec('1', 'x'))).toBe(specHash(JSON.parse(JSON.stringify(spec('1', 'x'))) as ToolSpec));
  });

  it('sorts keys as the built-in sort does, short objects and long ones alike', () => {
    const keys = [
      'b',
      'B',
      'a',
      '10',
      '9',
      '',
      'é',
      'Z',
      '_',
      'aa',
      'a b',
      '\u00ff',
      '\ud83d\ude00',
      'ab',
      'A',
    ];
    const sorted = (n: number) => {
      const picked = keys
        .slice(0, n)
        .concat(Array.from({ length: Math.max(0, n - keys.length) }, (_, i) => `k${i}`));
      const value = Object.fromEntries([...picked].reverse().map((k, i) => [k, i]));
      const expected = `{${[...picked]
        .sort()
        .map((k) => `${JSON.stringify(k)}:${value[k]}`)
        .join(',')}}`;
      expect(canonicalJson(value)).toBe(expected);
    };
    for (const n of [2, 3, 8, 15, 16, 17, 40]) sorted(n);
  });

  it('writes a spec as the generic canonical JSON does, on its fast path and off it', () => {
    const fixtures = JSON.parse(
      readFileSync(new URL('../../../test/fixtures/catalog/tools.json', import.meta.url), 'utf8'),
    ) as ToolSpec[];
    const withOutput = {
      ...spec('2', 'out "quoted"\n é'),
      output_schema: { type: 'object', properties: { z: { type: 'number' }, a: { enum: [1, 'x', null] } } },
      tags: ['b', 'a'],
      retry: {
        max_attempts: 3,
        timeout_ms: 5,
        retry_on: ['5xx', 'timeout'],
        backoff_ms: 1,
        max_backoff_ms: 2,
        jitter: 0.25,
      },
    } as ToolSpec;
    for (const s of [...fixtures, spec('1', 'x'), withOutput])
      expect(specCanonicalJson(s)).toBe(canonicalJson(s));
    // a member the fast path does not know (a schema that grew a field) is still in the text
    const grown = { ...withOutput, extra: { b: 1, a: 2 } } as ToolSpec;
    expect(specCanonicalJson(grown)).toBe(canonicalJson(grown));
    expect(specCanonicalJson(grown)).toContain('"extra":{"a":2,"b":1}');
  });

  it('writes and hashes the bytes of the generic canonical JSON, whatever the strings and numbers hold', () => {
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const units = [
      0, 8, 9, 10, 12, 13, 31, 32, 34, 47, 92, 127, 128, 0x7ff, 0x800, 0x2028, 0xd7ff, 0xd83d, 0xde00, 0xdbff,
      0xdc00, 0xdfff, 0xe000, 0xfeff, 0xffff,
    ];
    const text = () =>
      String.fromCharCode(
        ...Array.from({ length: Math.floor(next() * 12) }, () =>
          next() < 0.5 ? 97 + Math.floor(next() * 26) : units[Math.floor(next() * units.length)]!,
        ),
      );
    const numbers = [
      0,
      -0,
      1,
      -1,
      9,
      10,
      99,
      100,
      2147483647,
      -2147483648,
      2147483648,
      2 ** 53,
      -(2 ** 31) - 1,
      1.5,
      -0.25,
      1e21,
      1e-7,
      123456789.125,
      NaN,
      Infinity,
    ];
    for (let i = 0; i < 200; i++) {
      const schema: Record<string, unknown> = {};
      for (let k = 0; k < 1 + Math.floor(next() * 20); k++)
        schema[text()] =
          next() < 0.3
            ? numbers[Math.floor(next() * numbers.length)]
            : next() < 0.5
              ? [text(), { [text()]: text(), b: null }, true]
              : text();
      const s = {
        ...spec(text() || 'v', text() || 'd'),
        input_schema: schema,
        tags: [text(), text()],
      } as ToolSpec;
      const expected = canonicalJson(s);
      expect(specCanonicalJson(s)).toBe(expected);
      expect(specHash(s)).toBe(createHash('sha256').update(expected, 'utf8').digest('hex'));
      const texts = new SpecTexts();
      expect(texts.add(s)).toBe(specHash(s));
    }
    // a spec no validator saw, a required member undefined: left out, as the generic writer leaves it out
    const { cpu_bound: _dropped, ...rest } = spec('1', 'x');
    const unvalidated = { ...rest, cpu_bound: undefined } as unknown as ToolSpec;
    expect(specCanonicalJson(unvalidated)).toBe(canonicalJson(unvalidated));
    // members JSON leaves out or turns to null are written as the generic writer writes them
    const odd = {
      ...spec('1', 'x'),
      input_schema: { u: undefined, f: () => 1, a: [undefined, () => 1, NaN] },
    } as unknown as ToolSpec;
    expect(specCanonicalJson(odd)).toBe(canonicalJson(odd));
  });

  it('encodes a record the same whether its canonical texts are handed in or written again', () => {
    const v1 = spec('1', 'one');
    const v2 = spec('2', 'two');
    const tools = [
      { hash: specHash(v1), spec: v1 },
      { hash: specHash(v2), spec: v2, since: 3 },
    ];
    const texts = new SpecTexts();
    expect(tools.map((t) => texts.add(t.spec))).toEqual(tools.map((t) => t.hash));
    const withTexts = encodeRecord(record('w', tools), texts);
    expect(Buffer.from(encodeRecord(record('w', tools))).equals(Buffer.from(withTexts))).toBe(true);
    expect(JSON.parse(Buffer.from(withTexts).toString('utf8'))).toEqual(record('w', tools));
  });

  it('the fast path knows exactly the members the schemas define', () => {
    const keys = (shape: object) => Object.keys(shape).sort();
    expect([...SPEC_KEYS]).toEqual(keys(ToolSpecSchema.shape));
    expect([...RETRY_KEYS]).toEqual(keys(ToolSpecSchema.shape.retry.shape));
    expect([...SAFETY_KEYS]).toEqual(keys(ToolSpecSchema.shape.safety.shape));
  });

  it('orders versions numerically', () => {
    expect(['1.10', '1.9', '2', '1'].sort(compareVersions)).toEqual(['1', '1.9', '1.10', '2']);
    expect(compareVersions('1.0.0', '1.0.0')).toBe(0);
    // versions equal to the collator (case, leading zeros) still get one order, so every replica picks the same
    expect(['v1', 'V1'].sort(compareVersions)).toEqual(['V1', 'v1']);
    expect(['1.01', '1.1'].sort(compareVersions)).toEqual(['1.01', '1.1']);
  });

  it('serves the newest version by number, whatever order the versions were registered in', () => {
    for (const order of [
      ['1.10', '1.9', '2', '10'],
      ['10', '2', '1.9', '1.10'],
    ]) {
      const registry = new ToolRegistry();
      order.forEach((version, i) => {
        const v = spec(version, `v${version}`);
        registry.setWorker(`workers.w${i}`, record(`w${i}`, [{ hash: specHash(v), spec: v }]), i + 1);
      });
      expect(registry.live('json.format')?.spec.version).toBe('10');
      registry.setWorker(`workers.w${order.indexOf('10')}`, undefined, 9);
      expect(registry.live('json.format')?.spec.version).toBe('2');
    }
  });

  it('the earliest claim wins a conflict, and keeps winning when its worker registers again', () => {
    const registry = new ToolRegistry();
    const v1 = spec('1', 'first');
    const other = spec('1', 'other');
    const h1 = specHash(v1);
    const h2 = specHash(other);
    registry.setWorker('workers.a', record('a', [{ hash: h1, spec: v1 }]), 5);
    registry.setWorker('workers.b', record('b', [{ hash: h2, spec: other }]), 10);
    expect(registry.winner('json.format', '1')).toEqual({ hash: h1, workers: ['a'] });
    expect(registry.conflicts('json.format', '1', h2, 'b')).toEqual({ hash: h1, workers: ['a'] });
    const since = registry.claimedSince('a', 'json.format', '1', h1);
    expect(since).toBe(5);
    registry.setWorker('workers.a', record('a', [{ hash: h1, spec: v1, since: 5 }]), 11);
    expect(registry.live('json.format')).toMatchObject({ hash: h1, workers: ['a'] });
    registry.setWorker('workers.a', undefined, 12);
    expect(registry.live('json.format')).toMatchObject({ hash: h2, workers: ['b'] });
  });

  it('keeps one claim per worker and version, whatever a foreign record repeats, and drops them with the record', () => {
    const registry = new ToolRegistry();
    const v1 = spec('1', 'one');
    const h1 = specHash(v1);
    const twice = record('a', [
      { hash: h1, spec: v1 },
      { hash: h1, spec: v1 },
    ]);
    registry.setWorker('workers.a', twice, 1);
    registry.setWorker('workers.b', record('b', [{ hash: h1, spec: v1 }]), 2);
    expect(registry.winner('json.format', '1')).toEqual({ hash: h1, workers: ['a', 'b'] });
    registry.setWorker('workers.a', record('a', [{ hash: h1, spec: v1 }]), 3);
    expect(registry.live('json.format')?.workers).toEqual(['a', 'b']);
    registry.setWorker('workers.a', undefined, 4);
    expect(registry.live('json.format')?.workers).toEqual(['b']);
    registry.setWorker('workers.b', undefined, 5);
    expect(registry.live('json.format')).toBeUndefined();
    expect(registry.liveVersions('json.format')).toEqual([]);
    expect(registry.spec(h1)).toBeUndefined();
  });

  it('serves the newest live version and falls back as workers leave', () => {
    const registry = new ToolRegistry();
    const v1 = spec('1', 'old');
    const v2 = spec('2', 'new');
    registry.setWorker('workers.old', record('old', [{ hash: specHash(v1), spec: v1 }]), 1);
    registry.setWorker('workers.new', record('new', [{ hash: specHash(v2), spec: v2 }]), 2);
    expect(registry.liveVersions('json.format').map((t) => t.spec.version)).toEqual(['1', '2']);
    expect(registry.live('json.format')?.spec.description).toBe('new');
    registry.setWorker('workers.new', undefined, 3);
    expect(registry.live('json.format')?.spec.description).toBe('old');
    registry.setWorker('workers.old', undefined, 4);
    expect(registry.live('json.format')).toBeUndefined();
  });
});

describe('compareVersions, loaded', () => {
  it('makes no ICU collator until two different versions are compared', async () => {
    const Collator = Intl.Collator;
    let made = 0;
    Intl.Collator = class extends Collator {
      constructor(...args: ConstructorParameters<typeof Collator>) {
        super(...args);
        made++;
      }
    } as typeof Intl.Collator;
    try {
      vi.resetModules();
      const fresh = await import('./registry.js');
      expect(fresh.compareVersions('1', '1')).toBe(0);
      expect(made).toBe(0);
      expect(fresh.compareVersions('1.10', '1.9')).toBeGreaterThan(0);
      expect(fresh.compareVersions('2', '10')).toBeLessThan(0);
      expect(made).toBe(1);
    } finally {
      Intl.Collator = Collator;
    }
  });
});
