import { hash } from 'node:crypto';
import type { ToolSpec } from '@agentmesh/protocol';
import { RETRY_KEYS, SAFETY_KEYS, SPEC_KEYS, sortKeys } from './canonical.js';

let scratch: CanonicalBytes | undefined;

/** sha256 of the spec as canonical JSON (keys sorted), so equal specs hash equally whatever their key order. */
export function specHash(spec: ToolSpec): string {
  scratch ??= new CanonicalBytes(4096);
  scratch.length = 0;
  scratch.spec(spec);
  return hash('sha256', scratch.view(0, scratch.length), 'hex');
}

/**
 * {@link canonicalJson} of a validated spec, the same text: see {@link CanonicalBytes.spec}. Kept for callers that
 * want the text; the catalog itself hashes and stores the bytes.
 */
export function specCanonicalJson(spec: ToolSpec): string {
  const out = new CanonicalBytes(1024);
  out.spec(spec);
  return out.bytes.toString('utf8', 0, out.length);
}

const HEX = '0123456789abcdef';
/** The escape letter of a control character JSON writes short (`\n`), or 0 (it writes `\u00XX`). */
const SHORT_ESCAPES = new Uint8Array(32);
SHORT_ESCAPES[8] = 98; // \b
SHORT_ESCAPES[9] = 116; // \t
SHORT_ESCAPES[10] = 110; // \n
SHORT_ESCAPES[12] = 102; // \f
SHORT_ESCAPES[13] = 114; // \r

/**
 * Canonical JSON written straight to UTF-8 bytes, byte for byte the UTF-8 of {@link canonicalJson}: no string is
 * built, concatenated, flattened and encoded again for hashing and for the record, so a registration of 10,000 specs
 * leaves tens of MB less garbage behind. Values are written one after another into one growing buffer.
 */
export class CanonicalBytes {
  bytes: Buffer;
  length = 0;
  /** Whether {@link CanonicalBytes.spec} met an undefined member on its fast path. */
  private missing = false;

  constructor(capacity = 64 * 1024) {
    this.bytes = Buffer.allocUnsafe(capacity);
  }

  /** The bytes from `start` to `end` (a view: valid until the next write). */
  view(start: number, end: number): Uint8Array {
    return this.bytes.subarray(start, end);
  }

  /** {@link canonicalJson} of a validated spec, the members the schema fixes written in their sorted order. */
  spec(spec: ToolSpec): void {
    const { retry: r, safety: s } = spec;
    const members = spec.output_schema === undefined ? SPEC_KEYS.length - 1 : SPEC_KEYS.length;
    if (
      countKeys(spec) !== members ||
      typeof r !== 'object' ||
      r === null ||
      typeof s !== 'object' ||
      s === null ||
      countKeys(r) !== RETRY_KEYS.length ||
      countKeys(s) !== SAFETY_KEYS.length ||
      !Array.isArray(spec.tags) ||
      !Array.isArray(r.retry_on)
    ) {
      this.value(spec);
      return;
    }
    const start = this.length;
    this.missing = false;
    this.member('{"cpu_bound":', spec.cpu_bound);
    this.member(',"description":', spec.description);
    this.member(',"idempotent":', spec.idempotent);
    this.member(',"input_schema":', spec.input_schema);
    this.member(',"loading":', spec.loading);
    this.member(',"name":', spec.name);
    this.member(',"namespace":', spec.namespace);
    if (spec.output_schema !== undefined) this.member(',"output_schema":', spec.output_schema);
    this.member(',"retry":{"backoff_ms":', r.backoff_ms);
    this.member(',"jitter":', r.jitter);
    this.member(',"max_attempts":', r.max_attempts);
    this.member(',"max_backoff_ms":', r.max_backoff_ms);
    this.member(',"retry_on":', r.retry_on);
    this.member(',"timeout_ms":', r.timeout_ms);
    this.member('},"safety":{"external_spend":', s.external_spend);
    this.member(',"filesystem":', s.filesystem);
    this.member(',"mutating":', s.mutating);
    this.member(',"needs_confirmation":', s.needs_confirmation);
    this.member(',"networked":', s.networked);
    this.member(',"process":', s.process);
    this.member(',"read_only":', s.read_only);
    this.member('},"tags":', spec.tags);
    this.member(',"timeout_ms":', spec.timeout_ms);
    this.member(',"version":', spec.version);
    this.ascii('}');
    if (!this.missing) return;
    // a member the schema requires is undefined (a spec no validator saw): the generic writer leaves it out
    this.length = start;
    this.value(spec);
  }

  /** Any JSON value, as {@link canonicalJson} writes it. */
  value(v: unknown): void {
    switch (typeof v) {
      case 'string':
        this.string(v);
        return;
      case 'boolean':
        this.ascii(v ? 'true' : 'false');
        return;
      case 'number':
        this.number(v);
        return;
      case 'object':
        if (v === null) this.ascii('null');
        else if (Array.isArray(v)) this.array(v as unknown[]);
        else this.object(v as Record<string, unknown>);
        return;
      case 'bigint':
        this.ascii(JSON.stringify(v)); // throws, as canonicalJson does
        return;
      default:
        this.ascii('null'); // undefined, a function or a symbol: what canonicalJson writes for them
    }
  }

  /** A JSON string literal of `s`, escaped as `JSON.stringify` escapes it (lone surrogates as `\uXXXX`). */
  string(s: string): void {
    const n = s.length;
    const b = this.reserve(6 * n + 2);
    let p = this.length;
    b[p++] = 34;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x20 && c < 0x80 && c !== 34 && c !== 92) b[p++] = c;
      else if (c < 0x80) p = escape(b, p, c);
      else if (c < 0x800) {
        b[p++] = 0xc0 | (c >> 6);
        b[p++] = 0x80 | (c & 0x3f);
      } else if (c < 0xd800 || c > 0xdfff) {
        b[p++] = 0xe0 | (c >> 12);
        b[p++] = 0x80 | ((c >> 6) & 0x3f);
        b[p++] = 0x80 | (c & 0x3f);
      } else {
        const d = c <= 0xdbff && i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (d >= 0xdc00 && d <= 0xdfff) {
          const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          b[p++] = 0xf0 | (cp >> 18);
          b[p++] = 0x80 | ((cp >> 12) & 0x3f);
          b[p++] = 0x80 | ((cp >> 6) & 0x3f);
          b[p++] = 0x80 | (cp & 0x3f);
          i++;
        } else p = unicodeEscape(b, p, c);
      }
    }
    b[p++] = 34;
    this.length = p;
  }

  /** Text known to be ASCII, as it is. */
  ascii(s: string): void {
    const n = s.length;
    const b = this.reserve(n);
    let p = this.length;
    for (let i = 0; i < n; i++) b[p++] = s.charCodeAt(i);
    this.length = p;
  }

  /** Text as UTF-8, unescaped (JSON already). */
  utf8(s: string): void {
    this.reserve(3 * s.length);
    this.length += this.bytes.write(s, this.length, 'utf8');
  }

  /** Bytes as they are. */
  raw(bytes: Uint8Array): void {
    this.reserve(bytes.length).set(bytes, this.length);
    this.length += bytes.length;
  }

  private member(prefix: string, v: unknown): void {
    if (v === undefined) this.missing = true;
    this.ascii(prefix);
    this.value(v);
  }

  private number(n: number): void {
    if (n !== (n | 0)) {
      this.ascii(JSON.stringify(n) ?? 'null');
      return;
    }
    const b = this.reserve(11);
    let p = this.length;
    let u = n;
    if (u < 0) {
      b[p++] = 45;
      u = -u;
    }
    for (let rest = u; rest >= 10; rest = Math.floor(rest / 10)) p++;
    this.length = p + 1;
    do {
      b[p--] = 48 + (u % 10);
      u = Math.floor(u / 10);
    } while (u > 0);
  }

  private array(items: unknown[]): void {
    this.ascii('[');
    for (let i = 0; i < items.length; i++) {
      if (i > 0) this.ascii(',');
      this.value(items[i]);
    }
    this.ascii(']');
  }

  private object(record: Record<string, unknown>): void {
    const keys = sortKeys(Object.keys(record));
    this.ascii('{');
    let first = true;
    for (const key of keys) {
      const v = record[key];
      if (v === undefined) continue;
      if (!first) this.ascii(',');
      first = false;
      this.string(key);
      this.ascii(':');
      this.value(v);
    }
    this.ascii('}');
  }

  /** The buffer, grown (doubling) so that `n` more bytes fit. */
  private reserve(n: number): Buffer {
    const needed = this.length + n;
    if (needed <= this.bytes.length) return this.bytes;
    let size = this.bytes.length * 2;
    while (size < needed) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    return grown;
  }
}

/**
 * The enumerable keys of an object, counted without the array `Object.keys` builds. Inherited ones count too (only
 * someone extending `Object.prototype` adds any), which sends the spec down the generic path: slower, never wrong.
 */
function countKeys(value: object): number {
  let n = 0;
  for (const _ in value) n++;
  return n;
}

/** Writes the escape of an ASCII character JSON escapes (`"`, `\\`, a control character); returns the new end. */
function escape(b: Uint8Array, p: number, c: number): number {
  b[p++] = 92;
  if (c === 34 || c === 92) b[p++] = c;
  else if (SHORT_ESCAPES[c] !== 0) b[p++] = SHORT_ESCAPES[c]!;
  else return unicodeEscape(b, p - 1, c);
  return p;
}

/** Writes `\uXXXX` (lowercase hex, as `JSON.stringify` writes it); returns the new end. */
function unicodeEscape(b: Uint8Array, p: number, c: number): number {
  b[p++] = 92;
  b[p++] = 117;
  b[p++] = HEX.charCodeAt((c >> 12) & 15);
  b[p++] = HEX.charCodeAt((c >> 8) & 15);
  b[p++] = HEX.charCodeAt((c >> 4) & 15);
  b[p++] = HEX.charCodeAt(c & 15);
  return p;
}
