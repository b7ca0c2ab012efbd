// Two builds of the catalog in one process, as the bench's `register 10,000 tools` figure has it (client and catalog
// on one event loop), alternated block by block (ABBA): wall and CPU time of 100 registrations of 100 tools each,
// through a fresh catalog and bucket per block warmed on 1,000 other tools. Not a *.bench.mjs: `npm run bench` does
// not run it. Behind docs/benchmarks.md "Issue 37, eighth sitting".
//   node --expose-gc bench/catalog-register-ab.mjs NATS_URL A=path/to/catalog/dist/index.js B=... [BLOCKS=12]
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { NatsBus, silentLogger } from '@agentmesh/protocol';
import { registerAll, syntheticTools } from './catalog.bench.mjs';

const [natsUrl, a, b, blocksArg = '12'] = process.argv.slice(2);
const builds = [a, b].map((arg) => arg.split('='));
if (builds.some((pair) => pair.length !== 2) || typeof globalThis.gc !== 'function')
  throw new Error(
    'usage: node --expose-gc catalog-register-ab.mjs NATS_URL A=dist/index.js B=dist/index.js [BLOCKS]',
  );
const catalogs = await Promise.all(
  builds.map(async ([, path]) => (await import(pathToFileURL(path).href)).Catalog),
);
const catalogBus = await NatsBus.connect(natsUrl, { logger: silentLogger() });
const client = await NatsBus.connect(natsUrl, { logger: silentLogger() });
const tools = syntheticTools(10000);
const warm = tools
  .slice(0, 1000)
  .map((t) => ({ ...t, name: `warm${t.name}`, namespace: `warm${t.namespace}` }));

async function block(Catalog) {
  const id = randomUUID().slice(0, 8);
  const prefix = `abreg${id}`;
  const bucket = `ab_reg_${id}`;
  const catalog = new Catalog({ bus: catalogBus, prefix, bucket, logger: silentLogger() });
  await catalog.start();
  try {
    await registerAll(client, prefix, warm, { workerPrefix: 'warm-w' });
    globalThis.gc();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await registerAll(client, prefix, tools);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    if (catalog.toolNames().length !== tools.length + warm.length)
      throw new Error(`the catalog holds ${catalog.toolNames().length} tools`);
    return { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
  } finally {
    await catalog.stop();
    const jsm = await catalogBus.jetstreamManager();
    await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
  }
}

const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
const results = [[], []];
for (const Catalog of catalogs) await block(Catalog); // warm-up, not counted
for (let i = 0; i < Number(blocksArg); i++)
  for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) results[k].push(await block(catalogs[k]));
for (const [k, [name]] of builds.entries())
  console.log(
    `${name}: wall ${median(results[k].map((r) => r.ms)).toFixed(1)} ms, CPU ${median(results[k].map((r) => r.cpuMs)).toFixed(1)} ms`,
  );
const diff = (pick) => median(results[0].map((r, i) => pick(results[1][i]) - pick(r))).toFixed(1);
console.log(
  `${builds[1][0]} - ${builds[0][0]}, median of paired blocks: wall ${diff((r) => r.ms)} ms, CPU ${diff((r) => r.cpuMs)} ms`,
);
await Promise.all([client.close(), catalogBus.close()]);
