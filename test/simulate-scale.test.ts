import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without type declarations
import * as model from '../scripts/simulate-scale.mjs';

interface QueueResult {
  utilisation: number;
  classes: { mean: number; p50: number; p99: number }[];
}
interface Prediction {
  heartbeats_per_s: number;
  catalog_cpu: number;
  search_p50_us: number;
  search_p99_us: number;
  expiry_ms: number;
  call_throughput_host_bound: number;
}
const sim = model as {
  erlangC: (c: number, lambda: number, mu: number) => number;
  mmcResponse: (c: number, lambda: number, mu: number) => number;
  simulateQueue: (options: {
    classes: { rate: number; service: number; fixed?: boolean }[];
    servers?: number;
    arrivals?: number;
    seed?: number;
  }) => QueueResult;
  mva: (stations: { demand: number; servers?: number }[], population: number) => { throughput: number };
  predict: (costs: Record<string, number>, workers: number, heartbeatMs?: number) => Prediction;
  loadCosts: (path?: string) => Record<string, number>;
  DEFAULT_COSTS: Record<string, number>;
};

describe('the scaling model', () => {
  it('Erlang C matches its closed forms: M/M/1 waits with probability rho, M/M/2 with 2 rho^2 / (1 + rho)', () => {
    expect(sim.erlangC(1, 0.7, 1)).toBeCloseTo(0.7, 10);
    const rho = 0.6;
    expect(sim.erlangC(2, 2 * rho, 1)).toBeCloseTo((2 * rho * rho) / (1 + rho), 10);
    expect(sim.mmcResponse(1, 0.8, 1)).toBeCloseTo(1 / (1 - 0.8), 10);
    expect(sim.mmcResponse(1, 1, 1)).toBe(Infinity);
  });

  it('the discrete-event queue agrees with M/M/1 and M/M/2 (mean, and the M/M/1 p99 ln(100)/(mu - lambda))', () => {
    const one = sim.simulateQueue({ classes: [{ rate: 0.7, service: 1 }], arrivals: 300_000, seed: 3 });
    expect(one.classes[0]!.mean).toBeCloseTo(1 / (1 - 0.7), 0);
    expect(Math.abs(one.classes[0]!.mean / (1 / 0.3) - 1)).toBeLessThan(0.05);
    expect(Math.abs(one.classes[0]!.p99 / (Math.log(100) / 0.3) - 1)).toBeLessThan(0.06);
    expect(Math.abs(one.utilisation - 0.7)).toBeLessThan(0.02);
    const two = sim.simulateQueue({
      classes: [{ rate: 1.5, service: 1 }],
      servers: 2,
      arrivals: 300_000,
      seed: 5,
    });
    expect(Math.abs(two.classes[0]!.mean / sim.mmcResponse(2, 1.5, 1) - 1)).toBeLessThan(0.05);
  });

  it('M/D/1 from the simulation matches Pollaczek-Khinchine: W = rho / (2 mu (1 - rho)) + 1/mu', () => {
    const r = sim.simulateQueue({
      classes: [{ rate: 0.5, service: 1, fixed: true }],
      arrivals: 300_000,
      seed: 9,
    });
    expect(Math.abs(r.classes[0]!.mean / (0.5 / (2 * 0.5) + 1) - 1)).toBeLessThan(0.04);
  });

  it('mean value analysis: one customer sees the bare demand, many saturate at 1 / D (c / D for c servers)', () => {
    expect(sim.mva([{ demand: 0.01 }, { demand: 0.03 }], 1).throughput).toBeCloseTo(25, 6);
    expect(sim.mva([{ demand: 0.01 }, { demand: 0.03 }], 500).throughput).toBeCloseTo(1 / 0.03, 1);
    expect(sim.mva([{ demand: 0.01, servers: 2 }], 500).throughput).toBeCloseTo(200, 0);
  });

  it('predictions are monotone in the fleet size, and the catalog saturates before search returns nonsense', () => {
    const costs = sim.DEFAULT_COSTS;
    const rows = [10, 100, 1000, 10_000, 20_000].map((w) => sim.predict(costs, w, 1000));
    for (let i = 1; i < rows.length; i++) {
      expect(rows[i]!.heartbeats_per_s).toBeGreaterThan(rows[i - 1]!.heartbeats_per_s);
      expect(rows[i]!.catalog_cpu).toBeGreaterThan(rows[i - 1]!.catalog_cpu);
      // the simulated p99 carries sampling noise where the heartbeats barely load the loop
      expect(rows[i]!.search_p99_us).toBeGreaterThanOrEqual(rows[i - 1]!.search_p99_us * 0.9);
      expect(rows[i]!.search_p50_us).toBeGreaterThanOrEqual(rows[i - 1]!.search_p50_us - 1);
      expect(rows[i]!.call_throughput_host_bound).toBeLessThanOrEqual(
        rows[i - 1]!.call_throughput_host_bound,
      );
    }
    expect(rows[4]!.search_p99_us).toBeGreaterThan(rows[0]!.search_p99_us * 1.2);
    const heavy = { ...costs, heartbeat_cpu_us: 200 };
    expect(sim.predict(heavy, 10_000, 1000).search_p50_us).toBe(Infinity);
    expect(sim.predict(costs, 1000, 5000).heartbeats_per_s).toBe(200);
  });

  it('reads the costs a bench run wrote over its defaults', () => {
    const dir = mkdtempSync(join(tmpdir(), 'simulate-scale-'));
    const file = join(dir, 'costs.json');
    writeFileSync(file, JSON.stringify({ heartbeat_cpu_us: 99 }));
    const costs = sim.loadCosts(file);
    expect(costs['heartbeat_cpu_us']).toBe(99);
    expect(costs['search_service_us']).toBe(sim.DEFAULT_COSTS['search_service_us']);
    expect(sim.loadCosts(join(dir, 'absent.json'))).toEqual(sim.DEFAULT_COSTS);
  });
});
