import { describe, expect, it } from 'vitest';
import { StrideScheduler, type StrideCandidate } from './stride.js';

function starts(scheduler: StrideScheduler, candidates: StrideCandidate[], n: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const tenant = scheduler.pick(candidates)!;
    scheduler.charge(tenant, candidates.find((c) => c.tenant === tenant)!.weight, candidates);
    counts.set(tenant, (counts.get(tenant) ?? 0) + 1);
  }
  return counts;
}

describe('StrideScheduler', () => {
  it('gives starts in proportion to weight', () => {
    const counts = starts(
      new StrideScheduler(),
      [
        { tenant: 'acme', weight: 2 },
        { tenant: 'beta', weight: 1 },
      ],
      300,
    );
    expect(counts.get('acme')).toBe(200);
    expect(counts.get('beta')).toBe(100);
  });

  it('lets a tenant that was idle join at the current pass instead of taking a burst', () => {
    const scheduler = new StrideScheduler();
    starts(scheduler, [{ tenant: 'acme', weight: 1 }], 50);
    const both = [
      { tenant: 'acme', weight: 1 },
      { tenant: 'beta', weight: 1 },
    ];
    const counts = starts(scheduler, both, 20);
    expect(counts.get('acme')).toBe(10);
    expect(counts.get('beta')).toBe(10);
  });

  it('picks nothing without candidates', () => {
    expect(new StrideScheduler().pick([])).toBeUndefined();
  });
});
