/**
 * Calls `fn` for every item with at most `limit` calls in flight, and resolves with the results in the items' order.
 * For reading many keys from a store without one round trip after another, and without one request per key at once.
 * The first failure rejects; calls already started finish, and no new one starts.
 */
export async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const lane = async () => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        results[i] = await fn(items[i]!, i);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  return results;
}

/**
 * Runs the steps given for one key one after another (steps of different keys run side by side), each after the
 * previous one settled, whatever its outcome. For read-modify-write steps on one record in one process, which
 * would otherwise race each other's compare-and-set.
 */
export class KeyedSerializer {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, step: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(step);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Keys with a step queued or running. */
  get size(): number {
    return this.tails.size;
  }
}
