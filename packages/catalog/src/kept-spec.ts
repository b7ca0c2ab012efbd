import type { ToolLoading, ToolSpec } from '@agentmesh/protocol';
import { CanonicalBytes } from './canonical-bytes.js';

/** Safety flags whose `true` warns of a risk (confirmation, side effects, spend): a newer version may not drop one. */
export const WARNING_FLAGS = [
  'needs_confirmation',
  'mutating',
  'networked',
  'filesystem',
  'process',
  'external_spend',
] as const;
const READ_ONLY = 1 << WARNING_FLAGS.length;
const IDEMPOTENT = READ_ONLY << 1;

/** A spec's safety flags and `idempotent` as bits (a flag missing from a foreign record counts as false). */
export function safetyBits(spec: Pick<ToolSpec, 'safety' | 'idempotent'>): number {
  const s = spec.safety as Partial<ToolSpec['safety']> | undefined;
  let bits = spec.idempotent === true ? IDEMPOTENT : 0;
  if (s?.read_only === true) bits |= READ_ONLY;
  for (let i = 0; i < WARNING_FLAGS.length; i++) if (s?.[WARNING_FLAGS[i]!] === true) bits |= 1 << i;
  return bits;
}

/** The flags `newer` gives up against `older` (as {@link safetyBits}): warnings dropped, or safety claimed. */
export function droppedBits(older: number, newer: number): string[] {
  const dropped: string[] = [];
  WARNING_FLAGS.forEach((f, i) => {
    if (older & (1 << i) && !(newer & (1 << i))) dropped.push(`safety.${f}`);
  });
  if (!(older & READ_ONLY) && newer & READ_ONLY) dropped.push('safety.read_only');
  if (!(older & IDEMPOTENT) && newer & IDEMPOTENT) dropped.push('idempotent');
  return dropped;
}

/** Node's UTF-8 decoder without the argument checks of `toString`. */
const utf8Slice = (
  Buffer.prototype as unknown as { utf8Slice(this: Uint8Array, start: number, end: number): string }
).utf8Slice;

/**
 * A spec as the registry keeps it: the members its bookkeeping reads (name, version, namespace, description, loading,
 * the safety flags) as fields, the whole spec as its canonical JSON bytes. The bytes are a range of one buffer per
 * worker record, outside the V8 heap: keeping 10,000 specs as object trees made every scavenge of a registration
 * copy and promote them. A reader gets the spec parsed afresh ({@link KeptSpec.spec}): it may change it at will.
 */
export class KeptSpec {
  /** How many worker claims share this spec (the registry's count). */
  refs = 1;

  constructor(
    readonly name: string,
    readonly version: string,
    readonly namespace: string,
    readonly description: string,
    readonly loading: ToolLoading,
    /** {@link safetyBits} */
    readonly safety: number,
    private readonly bytes: Uint8Array,
    private readonly start: number,
    private readonly end: number,
  ) {}

  /** Keeps `spec` by the canonical JSON in `bytes[start, end)` (which must be that spec's). */
  static of(spec: ToolSpec, bytes: Uint8Array, start: number, end: number): KeptSpec {
    return new KeptSpec(
      spec.name,
      spec.version,
      spec.namespace,
      spec.description,
      spec.loading,
      safetyBits(spec),
      bytes,
      start,
      end,
    );
  }

  /** Bytes of the spec's canonical JSON. */
  get byteLength(): number {
    return this.end - this.start;
  }

  /** The spec's canonical JSON as UTF-8 (a view of the kept bytes: never written to). */
  canonical(): Uint8Array {
    return this.bytes.subarray(this.start, this.end);
  }

  /** The spec's canonical JSON. */
  text(): string {
    return utf8Slice.call(this.bytes, this.start, this.end);
  }

  /** The spec, a fresh copy the caller owns (canonical key order: the same JSON value as registered). */
  spec(): ToolSpec {
    return JSON.parse(this.text()) as ToolSpec;
  }
}

let scratch: CanonicalBytes | undefined;

/**
 * Keeps specs that came without their canonical bytes (a record read from the bucket): each is written as canonical
 * JSON into a scratch buffer, then copied into one buffer of their exact size, shared by them all.
 */
export function keepSpecs(specs: readonly ToolSpec[]): KeptSpec[] {
  scratch ??= new CanonicalBytes();
  const out = scratch;
  out.length = 0;
  const ends: number[] = [];
  for (const spec of specs) {
    out.spec(spec);
    ends.push(out.length);
  }
  const bytes = ownCopy(out.bytes, out.length);
  return specs.map((spec, i) => KeptSpec.of(spec, bytes, i === 0 ? 0 : ends[i - 1]!, ends[i]!));
}

/**
 * The first `length` bytes of `bytes` in a buffer of their own (never a slice of Node's shared pool, which a kept
 * range would keep alive whole).
 */
export function ownCopy(bytes: Uint8Array, length: number): Buffer {
  const copy = Buffer.allocUnsafeSlow(length);
  copy.set(bytes.subarray(0, length));
  return copy;
}
