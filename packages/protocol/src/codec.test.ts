import { describe, expect, it } from 'vitest';
import { decodeText, parseJson } from './codec.js';

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
