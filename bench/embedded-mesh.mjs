// The embedded mesh the planner figures run on (one MemoryBus, a math worker, a catalog of fixed specs, a planner),
// and the rounds of concurrent runs, shared by planner.bench.mjs and concurrent-planner.mjs (the same rounds in a
// process of their own).
import { performance } from 'node:perf_hooks';
import {
  CatalogGetSchema,
  CatalogListSchema,
  CatalogSearchSchema,
  MemoryBus,
  serve,
  silentLogger,
  subjects,
} from '@agentmesh/protocol';
import { Planner } from '@agentmesh/planner';
import { ToolWorker, mathCalcTool } from '@agentmesh/tool-worker';

export const add = { name: 'math.calc', arguments: { lhs: 2, rhs: 3, op: 'add' } };

/** A catalog that answers list/get/search from fixed specs (the planner only needs those three). */
export function miniCatalog(bus, specs, prefix) {
  const s = subjects(prefix);
  const subs = [
    serve({
      bus,
      subject: s.catalogList,
      schema: CatalogListSchema,
      what: 'list',
      // a fixed tool set is one version for good: a list that sends it back is answered `unchanged`, as the catalog does
      handler: (r) =>
        r.cached === 'fixed'
          ? { tools: [], unchanged: true, version: 'fixed' }
          : { tools: [], ...(r.full ? { specs } : {}), version: 'fixed' },
    }),
    serve({
      bus,
      subject: s.catalogGet,
      schema: CatalogGetSchema,
      what: 'get',
      handler: (r) => ({ tool: specs.find((t) => t.name === r.name), workers: [] }),
    }),
    serve({
      bus,
      subject: s.catalogSearch,
      schema: CatalogSearchSchema,
      what: 'search',
      handler: (r) => ({ results: [], strategy: r.strategy, limit: r.limit }),
    }),
  ];
  return () => subs.forEach((x) => x.unsubscribe());
}

export async function embeddedMesh(options = {}) {
  const bus = new MemoryBus();
  const worker = new ToolWorker({
    bus,
    tools: [mathCalcTool()],
    logger: silentLogger(),
    register: false,
    concurrency: 100_000,
  });
  await worker.start();
  const stopCatalog = miniCatalog(bus, worker.specs);
  const planner = new Planner({ bus, logger: silentLogger(), plannerId: 'bench-planner', ...options });
  return {
    bus,
    planner,
    async stop() {
      await planner.drain();
      stopCatalog();
      await worker.drain();
      await bus.close();
    },
  };
}

/**
 * Rounds of `count` runs at once, each two model turns of `latency` ms with a tool call between them, in one embedded
 * planner: the first round after start (JIT still compiling the run path, memory sampled), then two warm-up rounds,
 * then `measured` rounds (nine: a round that holds a major collection takes up to twice as long as one that holds
 * none, and one comes every three to five rounds, so the median of five moved with where they fell), sorted, with the
 * CPU time the process spent per run in each (sorted too). CPU time moves far less with the load of other processes
 * than the time to finish, which on 2 shared cores is mostly a measure of how much of a core the process got: the
 * rounds are CPU-bound (about 150 us of CPU a run against 100 us of wall).
 */
export async function concurrentRounds(count, latency = 50, measured = 9) {
  const mesh = await embeddedMesh({ maxConcurrentRuns: count });
  const script = [
    { tool_calls: [add], delay_ms: latency },
    { text: 'done', delay_ms: latency },
  ];
  let rounds = 0;
  let cpuPerRun = [];
  const round = async () => {
    const r = rounds++;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const finals = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        mesh.planner.execute({ id: `c-${r}-${i}`, task: 'bench', script, tool_search: 'off' }),
      ),
    );
    const elapsed = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    cpuPerRun.push((cpu.user + cpu.system) / count);
    const bad = finals.filter((f) => f.type !== 'run.completed' || f.status !== 'done');
    if (bad.length > 0) throw new Error(`${bad.length} runs did not finish done: ${JSON.stringify(bad[0])}`);
    return elapsed;
  };
  await mesh.planner.execute({ id: 'warm', task: 'warm', script: [{ text: 'ok' }] });
  global.gc?.();
  const before = process.memoryUsage();
  let peakHeap = before.heapUsed;
  let peakRss = before.rss;
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peakHeap = Math.max(peakHeap, m.heapUsed);
    peakRss = Math.max(peakRss, m.rss);
  }, 5);
  const first = await round();
  clearInterval(sampler);
  for (let i = 0; i < 2; i++) await round();
  const warmed = [];
  cpuPerRun = [];
  for (let i = 0; i < measured; i++) warmed.push(await round());
  warmed.sort((a, b) => a - b);
  cpuPerRun.sort((a, b) => a - b);
  await mesh.stop();
  return {
    first,
    warmed,
    cpuPerRun,
    heapGrowth: peakHeap - before.heapUsed,
    rssGrowth: peakRss - before.rss,
  };
}
