/** A tenant that has runs waiting, with its share of free capacity. */
export interface StrideCandidate {
  readonly tenant: string;
  readonly weight: number;
}

/**
 * Stride scheduling over tenants with runs waiting: each start goes to the candidate with the lowest pass, and a
 * start adds `1 / weight` to that tenant's pass, so starts follow the weights. A tenant that was idle joins at the
 * lowest pass among the candidates: it gets its share from now on, not a burst for the time it waited for nothing.
 */
export class StrideScheduler {
  private readonly passes = new Map<string, number>();

  /** The tenant to start a run of next, or undefined when there is no candidate. */
  pick(candidates: readonly StrideCandidate[]): string | undefined {
    const floor = this.floor(candidates);
    let best: { tenant: string; pass: number } | undefined;
    for (const { tenant } of candidates) {
      const pass = Math.max(this.passes.get(tenant) ?? floor, floor);
      this.passes.set(tenant, pass);
      if (best === undefined || pass < best.pass || (pass === best.pass && tenant < best.tenant))
        best = { tenant, pass };
    }
    return best?.tenant;
  }

  /** Records a start for `tenant` (picked among `candidates`). */
  charge(tenant: string, weight: number, candidates: readonly StrideCandidate[]): void {
    const floor = this.floor(candidates);
    this.passes.set(tenant, Math.max(this.passes.get(tenant) ?? floor, floor) + 1 / weight);
  }

  private floor(candidates: readonly StrideCandidate[]): number {
    let floor = Infinity;
    for (const { tenant } of candidates) {
      const pass = this.passes.get(tenant);
      if (pass !== undefined) floor = Math.min(floor, pass);
    }
    return floor === Infinity ? 0 : floor;
  }
}
