/** Slots a table can hold; a handle is `generation * SLOT_LIMIT + slot`. */
const SLOT_LIMIT = 2 ** 22;
const GENERATION_LIMIT = 2 ** 30;

/**
 * Values under numeric handles, kept in plain arrays: for registries with constant churn, such as the pending
 * requests of a connection or the running calls of a worker. A `Map` would do the same job, but V8 links each
 * hash table a Map outgrows to its successor. Once one of those tables is promoted (a pause in traffic is enough),
 * every later table, with every value it held, survives young-generation collections and is promoted in turn, so
 * the chain goes on while calls keep coming: under load, a 5 ms scavenge every 20 ms. Arrays have no such links.
 *
 * A handle is not reused while its generation counter has not wrapped (2^30 uses of one slot), so a stale handle,
 * such as the reply token of a request that already timed out, finds nothing.
 */
export class SlotTable<V extends object> {
  private readonly values: (V | undefined)[] = [];
  private readonly handles: number[] = [];
  private readonly free: number[] = [];
  private count = 0;

  /** How many values the table holds. */
  get size(): number {
    return this.count;
  }

  /** Stores `value` and returns its handle (a positive integer). */
  add(value: V): number {
    let slot = this.free.pop();
    if (slot === undefined) {
      slot = this.values.length;
      if (slot >= SLOT_LIMIT) throw new RangeError(`a slot table holds at most ${SLOT_LIMIT} values`);
      this.values.push(undefined);
      this.handles.push(0);
    }
    const generation = (Math.floor(this.handles[slot]! / SLOT_LIMIT) % GENERATION_LIMIT) + 1;
    const handle = generation * SLOT_LIMIT + slot;
    this.handles[slot] = handle;
    this.values[slot] = value;
    this.count++;
    return handle;
  }

  /**
   * A handle as text for a subject token, `<generation>_<slot>`: two small integers, which turn into text several
   * times faster than a handle past 2^31 (a double, as handles of a busy slot soon are). {@link fromToken} reads it.
   */
  static token(handle: number): string {
    const slot = handle % SLOT_LIMIT;
    return `${(handle - slot) / SLOT_LIMIT}_${slot}`;
  }

  /** The handle a {@link token} stands for (NaN for text that is not one; check what it finds). */
  static fromToken(token: string): number {
    const at = token.indexOf('_');
    if (at <= 0) return Number.NaN;
    return Number(token.slice(0, at)) * SLOT_LIMIT + Number(token.slice(at + 1));
  }

  /** The value stored under `handle`, or undefined when it was deleted or never given out. */
  get(handle: number): V | undefined {
    const slot = handle % SLOT_LIMIT;
    return this.handles[slot] === handle ? this.values[slot] : undefined;
  }

  /** Removes the value under `handle`; false when there was none. */
  delete(handle: number): boolean {
    const slot = handle % SLOT_LIMIT;
    if (this.handles[slot] !== handle || this.values[slot] === undefined) return false;
    this.values[slot] = undefined;
    this.free.push(slot);
    this.count--;
    return true;
  }

  /** Calls `visit` for every value with its handle; values may be added or deleted meanwhile. */
  forEach(visit: (value: V, handle: number) => void): void {
    const { values, handles } = this;
    for (let slot = 0; slot < values.length; slot++) {
      const value = values[slot];
      if (value !== undefined) visit(value, handles[slot]!);
    }
  }
}
