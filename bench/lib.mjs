// Shared measuring helpers for `npm run bench`. Each bench module exports `name` and
// `async run(ctx)` that returns figures: { name, value, unit, baseline?, ratio? }.
import { fork, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
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

/**
 * A figure, with its ratio to a baseline figure's value when one is given. `ratio` overrides value / baseline: the
 * median of the ratios of contenders measured side by side in blocks (see {@link pairedRatio}).
 */
export function figure(name, value, unit, baseline, ratio) {
  const f = { name, value: round(value), unit };
  if (baseline) {
    f.baseline = baseline.name;
    f.ratio = round(ratio ?? value / baseline.value);
  }
  return f;
}

/**
 * Measures contenders in `blocks` blocks, alternated: each block runs every contender once, each block starting with
 * the next one (AB, BA, AB, ...), so that a burst of load from other processes, the garbage collector or the JIT
 * lands on all of them alike. Returns, per contender, its results in block order.
 */
export async function alternated(contenders, blocks) {
  const results = contenders.map(() => []);
  for (let b = 0; b < blocks; b++)
    for (let i = 0; i < contenders.length; i++) {
      const k = (b + i) % contenders.length;
      results[k].push(await contenders[k]());
    }
  return results;
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The median over blocks of each of a contender's `measure` results (p50, p99, throughput). */
export function medianResult(results) {
  return {
    p50_us: median(results.map((r) => r.p50_us)),
    p99_us: median(results.map((r) => r.p99_us)),
    throughput: median(results.map((r) => r.throughput)),
    count: results[0].count * results.length,
    concurrency: results[0].concurrency,
    blocks: results.length,
  };
}

/** The median of `key`'s ratio a / b over blocks, a and b measured in the same block (next to each other). */
export function pairedRatio(as, bs, key) {
  const pick = typeof key === 'function' ? key : (r) => r[key];
  return median(as.map((a, i) => pick(a) / pick(bs[i])));
}

/**
 * The p50, p99 and throughput figures of one `measure` result, each against the matching baseline result. With
 * `blocks` ([results, baseline results] of {@link alternated}), each ratio is their {@link pairedRatio}.
 */
export function latencyFigures(label, result, baselineLabel, baselineResult, blocks) {
  const figs = [
    figure(`${label} p50`, result.p50_us, 'us'),
    figure(`${label} p99`, result.p99_us, 'us'),
    figure(`${label} throughput`, result.throughput, 'ops/s'),
  ];
  if (baselineResult) {
    const base = latencyFigures(baselineLabel, baselineResult);
    const keys = ['p50_us', 'p99_us', 'throughput'];
    figs.forEach((f, i) => {
      f.baseline = base[i].name;
      f.ratio = round(blocks ? pairedRatio(blocks[0], blocks[1], keys[i]) : f.value / base[i].value);
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

/**
 * CPU time (us) every thread of a process has run, from /proc/PID/task/TID/schedstat (nanoseconds, where /proc/PID/stat
 * counts 10 ms ticks); undefined without a pid or off Linux. A thread that ended meanwhile drops out of the sum: meant
 * for a process whose threads live as long as it does (nats-server, a node process).
 */
export function processCpuUs(pid) {
  if (pid === undefined) return undefined;
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`))
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    return ns / 1000;
  } catch {
    return undefined;
  }
}

/**
 * A bench helper in a process of its own that answers each IPC message with one message: `ask` sends one and resolves
 * with the answer (rejects on `{error}` or when the process exits), `stop` sends `{stop: true}` and waits for the exit.
 * Resolves once the process has sent its first message (it is up).
 */
export async function forkAsker(path, args, { label = path, cores } = {}) {
  const child = fork(path, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  pinToCores(child.pid, cores);
  const waiters = [];
  child.on('message', (msg) => waiters.shift()?.(msg));
  child.once('exit', (code) => {
    for (const w of waiters.splice(0)) w({ error: `${label} exited with ${code}` });
  });
  const next = () => new Promise((resolve) => waiters.push(resolve));
  await next();
  return {
    pid: child.pid,
    ask: async (msg) => {
      const answer = next();
      child.send(msg);
      const reply = await answer;
      if (reply.error) throw new Error(`${label}: ${reply.error}`);
      return reply;
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.send({ stop: true });
      await gone;
    },
  };
}

/** A `ToolWorker` serving math.calc on `bus` under `prefix` (no registration, 256 calls at once), started. */
export async function startMathWorker(bus, prefix) {
  const { silentLogger } = await import('@agentmesh/protocol');
  const { ToolWorker, mathCalcTool } = await import('@agentmesh/tool-worker');
  const worker = new ToolWorker({
    bus,
    tools: [mathCalcTool()],
    prefix,
    logger: silentLogger(),
    register: false,
    concurrency: 256,
  });
  await worker.start();
  await bus.flush();
  return worker;
}

/**
 * A maker of math.calc invocations with ids shaped as a run's: the planner's run id and a provider's call id
 * (OpenAI's: `call_` and 24 characters). Not `c-1`, `c-2`...: V8 enters every JSON string value under 10 characters
 * into its string table, so a unique short id cost each side a string-table insert a call (5% of the process's CPU at
 * 64 in flight), which a model's call ids do not (docs/benchmarks.md, "Issue 37, ninth sitting").
 */
export function mathCalcInvocations(args = { lhs: 2, rhs: 3, op: 'add' }) {
  const runId = `run-${randomUUID()}`;
  const stem = `call_${randomUUID().replaceAll('-', '').slice(0, 14)}`;
  let seq = 0;
  return () => ({
    call_id: `${stem}${(++seq).toString(36).padStart(10, '0')}`,
    run_id: runId,
    tool: 'math.calc',
    arguments: args,
  });
}
