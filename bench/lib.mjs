// Shared measuring helpers for `npm run bench`. Each bench module exports `name` and
// `async run(ctx)` that returns figures: { name, value, unit, baseline?, ratio? }.
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';

/** Runs `fn` `count` times with `concurrency` calls in flight; returns latency percentiles (us) and throughput (/s). */
export async function measure(fn, { count = 2000, concurrency = 1, warmup = Math.min(200, count) } = {}) {
  for (let i = 0; i < warmup; i++) await fn(i);
  const latencies = new Float64Array(count);
  let next = 0;
  const started = performance.now();
  async function lane() {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      const t0 = performance.now();
      await fn(i);
      latencies[i] = performance.now() - t0;
    }
  }
  await Promise.all(Array.from({ length: concurrency }, lane));
  const elapsedMs = performance.now() - started;
  const sorted = Array.from(latencies).sort((a, b) => a - b);
  const pick = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] * 1000;
  return {
    p50_us: pick(0.5),
    p99_us: pick(0.99),
    throughput: (count / elapsedMs) * 1000,
    count,
    concurrency,
  };
}

/** A figure, with its ratio to a baseline figure's value when one is given. */
export function figure(name, value, unit, baseline) {
  const f = { name, value: round(value), unit };
  if (baseline) {
    f.baseline = baseline.name;
    f.ratio = round(value / baseline.value);
  }
  return f;
}

/** The p50, p99 and throughput figures of one `measure` result, each against the matching baseline result. */
export function latencyFigures(label, result, baselineLabel, baselineResult) {
  const figs = [
    figure(`${label} p50`, result.p50_us, 'us'),
    figure(`${label} p99`, result.p99_us, 'us'),
    figure(`${label} throughput`, result.throughput, 'ops/s'),
  ];
  if (baselineResult) {
    const base = latencyFigures(baselineLabel, baselineResult);
    figs.forEach((f, i) => {
      f.baseline = base[i].name;
      f.ratio = round(f.value / base[i].value);
    });
  }
  return figs;
}

export function round(v) {
  return Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 100) / 100;
}

/**
 * The cores a bench gives the nats-server it starts and the processes that measure: on a machine with two cores or
 * more, the server gets core 0 (which also takes most interrupts and housekeeping) and the measuring processes the
 * others, so that the kernel's placement of the two (sometimes on one core while the other idles) does not decide a
 * result. Undefined on one core.
 */
export function benchCores() {
  const n = availableParallelism();
  if (n < 2) return undefined;
  return { nats: '0', bench: n === 2 ? '1' : `1-${n - 1}` };
}

/** Pins every thread of a process to `cores` with taskset; false (and no pinning) when taskset is not installed. */
export function pinToCores(pid, cores) {
  if (cores === undefined) return false;
  const result = spawnSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { stdio: 'ignore' });
  return result.status === 0;
}
