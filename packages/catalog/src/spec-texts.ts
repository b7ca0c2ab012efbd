import { hash } from 'node:crypto';
import type { ToolSpec } from '@agentmesh/protocol';
import { CanonicalBytes } from './canonical-bytes.js';

/** A buffer a cleared {@link SpecTexts} gave back: fresh memory costs a page fault every 4 KiB it is first written. */
let spare: CanonicalBytes | undefined;

/**
 * The canonical JSON of a registration's specs, kept as bytes by hash between the screening that hashes them and the
 * record that stores them, so each spec is written once. Clear it once the record is encoded: its buffer is reused.
 */
export class SpecTexts {
  private out: CanonicalBytes | undefined;
  /** hash -> [start, end) in `out` */
  private readonly ranges = new Map<string, [number, number]>();

  /** Writes the spec's canonical JSON and returns its hash (sha256, hex). */
  add(spec: ToolSpec): string {
    if (this.out === undefined) {
      this.out = spare ?? new CanonicalBytes();
      this.out.length = 0;
      spare = undefined;
    }
    const out = this.out;
    const start = out.length;
    out.spec(spec);
    const hex = hash('sha256', out.view(start, out.length), 'hex');
    if (this.ranges.has(hex)) out.length = start;
    else this.ranges.set(hex, [start, out.length]);
    return hex;
  }

  /** Writes the spec's canonical JSON into `into`: the bytes kept for `hex`, else written again. */
  writeTo(into: CanonicalBytes, hex: string, spec: ToolSpec): void {
    const range = this.ranges.get(hex);
    if (range === undefined || this.out === undefined) into.spec(spec);
    else into.raw(this.out.view(range[0], range[1]));
  }

  /** Bytes kept so far (a record written from them needs about this much room). */
  get size(): number {
    return this.out?.length ?? 0;
  }

  /** Drops the bytes (a later record writes its specs again) and gives the buffer back for the next registration. */
  clear(): void {
    spare ??= this.out;
    this.out = undefined;
    this.ranges.clear();
  }
}
