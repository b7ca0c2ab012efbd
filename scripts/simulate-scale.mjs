#!/usr/bin/env node
// A queueing model of the agentmesh fleet, fed with the per-message costs `npm run bench -- --only scale` measures
// (bench/scale-costs.json; defaults below when it is absent), predicting what 10, 100, 1,000 and 10,000 workers cost
// the catalog and the NATS server, how tool_search latency moves under the heartbeat load (a discrete-event
// simulation of the catalog's one event loop), when a killed worker is noticed, and tool-call throughput.
// Usage: node scripts/simulate-scale.mjs [--costs FILE] [--heartbeat-ms MS] [--json]
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Medians measured on the project's 2-core machine (2026-11-26, batched heartbeats); a bench run overrides them. */
export const DEFAULT_COSTS = {
  heartbeat_ms: 1000,
  workers: 1000,
  tools_per_worker: 10,
  /** catalog CPU per heartbeat answered (us) */
  heartbeat_cpu_us: 45,
  /** nats-server CPU per heartbeat (us): routing the request and its reply, and any KV write it causes */
  server_cpu_per_heartbeat_us: 70,
  /** one bm25 search over 10,000 tools with no heartbeat, less the raw round trip (us; on the bench's busy host) */
  search_service_us: 650,
  /** a raw NATS request/reply on this host (us) */
  raw_request_p50_us: 70,
  /** tool calls per second, 64 in flight, to 10 workers: the host-bound baseline */
  call_throughput_10: 9500,
  /** host cores the bench shared between every process */
  cores: 2,
  /** worker-side CPU of one heartbeat (us): the request, its reply, the timer */
  worker_cpu_per_heartbeat_us: 40,
  /** catalog time per registration of 10 specs, 8 in flight from one connection (us): the bench's floor */
  register_us: 1900,
  /** bytes of one worker id in a pulse entry, quotes and comma included */
  pulse_bytes_per_worker: 20,
};

/** Reads the costs the bench wrote, over the defaults. */
export function loadCosts(path) {
  const costs = { ...DEFAULT_COSTS };
  if (path !== undefined && existsSync(path)) Object.assign(costs, JSON.parse(readFileSync(path, 'utf8')));
  // the search's own time: the same search before any heartbeat, less the raw round trip
  if (costs.search_quiet_p50_us !== undefined)
    costs.search_service_us = Math.max(20, costs.search_quiet_p50_us - costs.raw_request_p50_us);
  return costs;
}

/** Erlang C: the probability that an arrival waits in an M/M/c queue (rates per second). */
export function erlangC(c, lambda, mu) {
  const a = lambda / mu;
  const rho = a / c;
  if (rho >= 1) return 1;
  let term = 1;
  let sum = 1;
  for (let k = 1; k < c; k++) {
    term *= a / k;
    sum += term;
  }
  const top = ((term * a) / c) * (1 / (1 - rho));
  return top / (sum + top);
}

/** Mean time in an M/M/c system (wait plus service), in the unit of 1/mu; Infinity when saturated. */
export function mmcResponse(c, lambda, mu) {
  if (lambda >= c * mu) return Infinity;
  return erlangC(c, lambda, mu) / (c * mu - lambda) + 1 / mu;
}

/** A seeded uniform generator (mulberry32), so a simulation repeats exactly. */
export function rng(seed) {
  let t = seed >>> 0;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let x = Math.imul(t ^ (t >>> 15), 1 | t);
    x ^= x + Math.imul(x ^ (x >>> 7), 61 | x);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const exponential = (random, mean) => -Math.log(1 - random()) * mean;

/**
 * A discrete-event simulation of a FIFO queue with `servers` servers and Poisson arrivals of several classes, each
 * with its own rate (per second) and mean service time (seconds, exponential or, with `fixed`, constant). Returns per
 * class the mean, p50 and p99 time in the system (seconds), and the servers' utilisation.
 */
export function simulateQueue({ classes, servers = 1, arrivals = 200_000, seed = 1 }) {
  const random = rng(seed);
  const total = classes.reduce((s, c) => s + c.rate, 0);
  const free = new Array(servers).fill(0);
  const times = classes.map(() => []);
  let clock = 0;
  let busy = 0;
  for (let i = 0; i < arrivals; i++) {
    clock += exponential(random, 1 / total);
    let pick = random() * total;
    let k = 0;
    while (pick > classes[k].rate && k < classes.length - 1) pick -= classes[k++].rate;
    const cls = classes[k];
    const service = cls.fixed ? cls.service : exponential(random, cls.service);
    let s = 0;
    for (let j = 1; j < servers; j++) if (free[j] < free[s]) s = j;
    const start = Math.max(clock, free[s]);
    free[s] = start + service;
    busy += service;
    times[k].push(free[s] - clock);
  }
  const span = Math.max(clock, ...free);
  return {
    utilisation: busy / (span * servers),
    classes: times.map((t) => {
      const sorted = Float64Array.from(t).sort();
      const pick = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
      return { mean: t.reduce((a, b) => a + b, 0) / Math.max(1, t.length), p50: pick(0.5), p99: pick(0.99) };
    }),
  };
}

/**
 * Exact mean value analysis of a closed network: `population` customers (calls in flight), stations with a demand
 * per visit (seconds) and `servers` (a c-server station by Seidmann's approximation: a queue of demand D/c plus a
 * delay of D(c-1)/c). Returns the throughput (per second) and the response time (seconds).
 */
export function mva(stations, population) {
  const expanded = [];
  for (const s of stations) {
    const c = s.servers ?? 1;
    expanded.push({ demand: s.demand / c, delay: false });
    if (c > 1) expanded.push({ demand: (s.demand * (c - 1)) / c, delay: true });
  }
  const queue = expanded.map(() => 0);
  let throughput = 0;
  let response = 0;
  for (let n = 1; n <= population; n++) {
    const r = expanded.map((s, i) => (s.delay ? s.demand : s.demand * (1 + queue[i])));
    response = r.reduce((a, b) => a + b, 0);
    throughput = n / response;
    r.forEach((ri, i) => (queue[i] = throughput * ri));
  }
  return { throughput, response };
}

/** What `workers` workers cost and how the catalog answers, with heartbeats every `heartbeatMs`. */
export function predict(costs, workers, heartbeatMs = costs.heartbeat_ms, options = {}) {
  const beats = (workers * 1000) / heartbeatMs;
  const catalogUtil = (beats * costs.heartbeat_cpu_us) / 1e6;
  const serverUtil = (beats * costs.server_cpu_per_heartbeat_us) / 1e6;
  const workerSide = (beats * costs.worker_cpu_per_heartbeat_us) / 1e6;
  const searchRate = options.searchRate ?? 50;
  const sim =
    catalogUtil + (searchRate * costs.search_service_us) / 1e6 >= 1
      ? undefined
      : simulateQueue({
          classes: [
            { rate: beats, service: costs.heartbeat_cpu_us / 1e6 },
            { rate: searchRate, service: costs.search_service_us / 1e6, fixed: true },
          ],
          arrivals: options.arrivals ?? Math.min(400_000, Math.max(40_000, beats * 20)),
          seed: options.seed ?? 7,
        });
  const ttl = heartbeatMs * 3;
  const sweep = Math.min(1000, Math.max(25, ttl / 5));
  // host-bound calls (every process on `cores` cores): the heartbeat work takes its share of the cores first
  const background = catalogUtil + serverUtil + workerSide;
  const perCall = (costs.cores * 1e6) / costs.call_throughput_10;
  const calls =
    mva([{ demand: perCall / 1e6, servers: costs.cores }], options.inFlight ?? 64).throughput *
    Math.max(0, 1 - background / costs.cores);
  return {
    workers,
    heartbeats_per_s: beats,
    catalog_cpu: catalogUtil,
    server_cpu: serverUtil,
    search_p50_us: sim === undefined ? Infinity : costs.raw_request_p50_us + sim.classes[1].p50 * 1e6,
    search_p99_us: sim === undefined ? Infinity : costs.raw_request_p50_us + sim.classes[1].p99 * 1e6,
    expiry_ms: ttl + sweep / 2 + sweep / 2,
    register_all_ms: (workers * costs.register_us) / 1000,
    call_throughput_host_bound: calls,
    pulse_bytes_per_flush: Math.ceil((beats * sweep) / 1000) * costs.pulse_bytes_per_worker,
  };
}

function table(rows) {
  const head = Object.keys(rows[0]);
  const cells = rows.map((r) => head.map((h) => fmt(r[h])));
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (r) => r.map((c, i) => c.padStart(widths[i])).join('  ');
  return [line(head), ...cells.map(line)].join('\n');
}

const fmt = (v) =>
  typeof v !== 'number'
    ? String(v)
    : !Number.isFinite(v)
      ? 'saturated'
      : Number.isInteger(v) || v >= 100
        ? String(Math.round(v))
        : v.toFixed(3);

function main() {
  const argv = process.argv.slice(2);
  const arg = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
  const path = arg('--costs') ?? fileURLToPath(new URL('../bench/scale-costs.json', import.meta.url));
  const costs = loadCosts(path);
  const heartbeatMs = Number(arg('--heartbeat-ms') ?? costs.heartbeat_ms);
  const rows = [10, 100, 1000, 10_000].map((w) => predict(costs, w, heartbeatMs));
  if (argv.includes('--json')) {
    console.log(JSON.stringify({ costs, heartbeat_ms: heartbeatMs, predictions: rows }, null, 2));
    return;
  }
  console.log(
    `costs: ${existsSync(path) ? path : 'defaults (no bench/scale-costs.json)'}; heartbeat every ${heartbeatMs} ms`,
  );
  console.log(table(rows));
  if (costs.heartbeats_per_s !== undefined) {
    const at = predict(costs, costs.workers, costs.heartbeat_ms);
    const measured = {
      heartbeats_per_s: costs.heartbeats_per_s,
      catalog_cpu: costs.catalog_cpu_share,
      search_p50_us: costs.search_p50_us,
      search_p99_us: costs.search_p99_us,
      expiry_ms: costs.expiry_ms,
      register_all_ms: costs.register_all_ms,
      call_throughput_host_bound: costs.call_throughput,
    };
    console.log(`\nmodel vs the bench at ${costs.workers} workers:`);
    console.log(
      table(
        Object.entries(measured)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => ({ figure: k, model: at[k], measured: v, 'measured / model': v / at[k] })),
      ),
    );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
