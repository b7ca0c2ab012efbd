/**
 * Issue 21, part 3, the CI form of `npm run soak`: 60 s of runs at a steady rate through a real fleet with a worker
 * killed (-9) every 15 s. No run lost, every run done, no non-idempotent call twice, each long-lived actor's heap
 * (after a full GC) and RSS flat within 10%, subscription and consumer counts flat. The report goes to
 * test/.results/soak.json.
 */
import { describe, expect, it } from 'vitest';
import { runSoak } from './helpers/cli.js';

interface SoakReport {
  runs: number;
  runs_lost: number;
  runs_not_done: number;
  calls_twice: number;
  worker_kills: unknown[];
  growth: { what: string; growth: number }[];
  checks: Record<string, boolean>;
  ok: boolean;
}

describe('soak, CI form (60 s)', () => {
  it('runs at a steady rate with worker kills: none lost, memory and subscriptions flat', async () => {
    const { code, report } = await runSoak<SoakReport>('soak', [
      '--duration',
      '60',
      '--rate',
      '10',
      '--kill-every',
      '15',
    ]);
    console.log('soak figures', {
      runs: report.runs,
      lost: report.runs_lost,
      kills: report.worker_kills.length,
      growth: report.growth,
    });
    expect(report.runs).toBeGreaterThanOrEqual(590);
    expect(report.worker_kills.length).toBeGreaterThanOrEqual(3);
    expect(report.runs_lost).toBe(0);
    expect(report.runs_not_done).toBe(0);
    expect(report.calls_twice).toBe(0);
    expect(report.growth.length).toBeGreaterThanOrEqual(6);
    expect(report.checks).toEqual({
      runs_lost: true,
      all_done: true,
      no_call_twice: true,
      memory_flat: true,
      subscriptions_flat: true,
      consumers_flat: true,
    });
    expect(code).toBe(0);
  }, 300_000);
});
