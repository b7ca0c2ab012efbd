import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  FAST_CHECK_COMPILE_AFTER,
  NOT_COPIED,
  decodeText,
  fastValidator,
  itemCount,
  jsonCopy,
  outputCheck,
  parseJson,
  validate,
} from './codec.js';
import { jsonSchemaCompiles } from './json-schema-check.js';

describe('decodeText', () => {
  it('decodes exactly as TextDecoder does: multi-byte text, a leading BOM, malformed and cut sequences', () => {
    const reference = new TextDecoder();
    const utf8 = (s: string) => new TextEncoder().encode(s);
    const inputs = [
      new Uint8Array(0),
      utf8('{"a":"grüße 日本 ✓ 🎉"}'),
      Uint8Array.of(0xef, 0xbb, 0xbf, ...utf8('{"bom":true}')),
      Uint8Array.of(0x61, 0xff, 0x62, 0xc3),
      Uint8Array.of(0xf0, 0x9f, 0x8e),
      utf8('a\u0000b\r\n'),
    ];
    for (const bytes of inputs) expect(decodeText(bytes)).toBe(reference.decode(bytes));
  });

  it('decodes a view into a larger buffer without reading past it', () => {
    const whole = new TextEncoder().encode('xx{"ok":1}yy');
    expect(parseJson(whole.subarray(2, 10))).toEqual({ ok: 1 });
  });
});

describe('jsonCopy', () => {
  const roundTrip = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

  it('copies plain JSON data deeply, equal to a JSON round trip', () => {
    const inner = { deep: [1, { x: 'y' }] };
    const values = [
      'text',
      0,
      -0,
      1.5e300,
      true,
      null,
      [],
      {},
      [1, 'a', null, [false]],
      { a: 1, b: { c: 'grüße 日本', d: [inner, inner] }, skipped: undefined, fn: () => 1 },
      Object.assign(Object.create(null) as object, { k: 'v' }),
    ];
    for (const value of values) {
      const copy = jsonCopy(value, 1 << 20);
      expect(copy).toStrictEqual(roundTrip(value));
      if (typeof value === 'object' && value !== null) expect(copy).not.toBe(value);
    }
    const copy = jsonCopy({ inner }, 1 << 20) as { inner: typeof inner };
    expect(copy.inner).not.toBe(inner);
    expect(copy.inner.deep[1]).not.toBe(inner.deep[1]);
    expect(Object.is(jsonCopy(-0, 100), 0)).toBe(true);
  });

  it('gives up on what JSON would convert or reject, on deep nesting and on what may be too large', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    for (const value of [undefined, () => 1, Symbol('s')]) expect(jsonCopy(value, 1 << 20)).toBe(NOT_COPIED);
    const refused = [
      10n,
      Number.NaN,
      Infinity,
      new Date(0),
      { toJSON: () => 'x' },
      new Map(),
      new Uint8Array(2),
      [undefined],
      [1, , 3],
      JSON.parse('{"__proto__":{"x":1}}') as unknown,
      new (class Point {
        x = 1;
      })(),
      cyclic,
      deep,
    ];
    for (const value of refused) expect(jsonCopy({ value }, 1 << 20)).toBe(NOT_COPIED);
    const text = 'é'.repeat(100);
    expect(jsonCopy({ text }, 6 * 100 + 100)).toStrictEqual({ text });
    expect(jsonCopy({ text }, 6 * 100)).toBe(NOT_COPIED);
  });

  it('refuses inherited enumerable keys, which JSON leaves out', () => {
    const proto = Object.prototype as Record<string, unknown>;
    proto['polluted'] = 1;
    try {
      expect(jsonCopy({ a: 1 }, 1 << 20)).toBe(NOT_COPIED);
    } finally {
      delete proto['polluted'];
    }
    expect(jsonCopy({ a: 1 }, 1 << 20)).toEqual({ a: 1 });
  });
});

describe('fastValidator', () => {
  const Schema = z
    .object({
      name: z.string().min(1),
      items: z.array(z.number().int()),
      mode: z.enum(['a', 'b']).default('a'),
    })
    .strict();
  const valid = { name: 'x', items: [1, 2], mode: 'b' as const };
  const defaulted = { name: 'y', items: [] };
  const invalid = [
    { name: '', items: [1.5], mode: 'c' },
    { items: 'no' },
    null,
    'text',
    { ...valid, extra: 1 },
  ];

  /** What each value gives: the value, or the error's code and message. */
  const answer = (check: (value: unknown, what: string) => unknown, value: unknown) => {
    try {
      return { value: check(value, 'thing') };
    } catch (error) {
      return { error: `${(error as { code: string }).code}: ${(error as Error).message}` };
    }
  };

  it('answers exactly as zod does before and after it compiles, and compiles only past the threshold', () => {
    const check = fastValidator(Schema);
    const zod = (value: unknown, what: string) => validate(Schema, value, what);
    const compiledBefore = jsonSchemaCompiles();
    for (let call = 1; call <= FAST_CHECK_COMPILE_AFTER + 8; call++) {
      const value = [valid, defaulted, ...invalid][call % (invalid.length + 2)];
      expect(answer(check, value)).toStrictEqual(answer(zod, value));
      expect(jsonSchemaCompiles() - compiledBefore).toBe(call <= FAST_CHECK_COMPILE_AFTER ? 0 : 1);
    }
    const passed = { ...valid };
    expect(check(passed, 'thing')).toBe(passed); // compiled: a value in its output form is returned as it is
  });

  it('counts a value for what its weight says, so a large request compiles at once', () => {
    const check = fastValidator(Schema, undefined, (value) => itemCount(value, 'items'));
    const compiledBefore = jsonSchemaCompiles();
    expect(check(valid, 'thing')).toStrictEqual(valid);
    expect(jsonSchemaCompiles()).toBe(compiledBefore);
    const large = {
      name: 'z',
      items: Array.from({ length: FAST_CHECK_COMPILE_AFTER }, (_, i) => i),
      mode: 'a',
    };
    expect(check(large, 'thing')).toBe(large);
    expect(jsonSchemaCompiles()).toBe(compiledBefore + 1);
  });

  it('weighs hostile values without throwing', () => {
    for (const value of [null, undefined, 5, 'items', [], { items: 'no' }, { items: { length: 9 } }])
      expect(itemCount(value, 'items')).toBe(0);
    expect(itemCount({ items: [1, 2, 3] }, 'items')).toBe(3);
  });
});

describe('outputCheck', () => {
  it('without a deferral compiles on its first call and passes a valid value then', () => {
    const check = outputCheck(z.object({ free: z.number().int().min(1) }).strict());
    const compiledBefore = jsonSchemaCompiles();
    expect(check({ free: 1 })).toBe(true);
    expect(jsonSchemaCompiles()).toBe(compiledBefore + 1);
    expect(check({ free: 0 })).toBe(false);
    expect(check({ free: 1, extra: true })).toBe(false);
  });

  it('with a deferral answers "not checked" until it has been asked enough', () => {
    const check = outputCheck(z.object({ free: z.number() }), { after: 3 });
    const compiledBefore = jsonSchemaCompiles();
    expect([1, 2, 3].map(() => check({ free: 1 }))).toEqual([false, false, false]);
    expect(jsonSchemaCompiles()).toBe(compiledBefore);
    expect(check({ free: 1 })).toBe(true);
    expect(check({ free: 'x' })).toBe(false);
    expect(jsonSchemaCompiles()).toBe(compiledBefore + 1);
  });
});
